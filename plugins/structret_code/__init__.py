"""Built-in code plugins: function miners for Python (ast) and go/java/javascript/php/ruby (tree-sitter)."""
