from structret import hookimpl

TREE_SITTER_LANGUAGES = ("go", "java", "javascript", "php", "ruby")


@hookimpl
def register_miners(register):
    register("python", "structret_code.python_miner:PythonMiner", help="functions and methods via Python's ast")
    for language in TREE_SITTER_LANGUAGES:
        register(
            language,
            f"structret_code.treesitter_miner:{language}",
            help=f"functions and methods via tree-sitter-{language}",
        )


@hookimpl
def register_chunkers(register):
    register("syntax", "structret_code.chunker:CodeChunker", options="structret_code.options:CodeChunker",
             help="a unit per definition and per run of code between them, every line of 19 languages (tree-sitter) "
                  "and of text files")


@hookimpl
def register_extractors(register):
    register(
        "python-tokenize",
        "structret_code.extractors:PythonTokenize",
        options="structret_code.options:PythonTokenize",
        help="every non-keyword NAME token of Python's tokenize (SANTA's method for Python)",
    )
    register(
        "tree-sitter",
        "structret_code.extractors:TreeSitterIdentifiers",
        options="structret_code.options:TreeSitterIdentifiers",
        help="identifier nodes of any language with an installed tree-sitter grammar (SANTA's method)",
    )


@hookimpl
def register_linearizers(register):
    # Khan & Jang's inputs: the code's tokens, and its AST in pre-order with each token's parent
    module = "structret_code.linearizers"
    options = "structret_code.options:CodeLinearizer"  # one model: the four take the same options
    register("raw", f"{module}:raw", options=options,
             help="the code's own tokens (Python tokenize, else tree-sitter leaves)")
    register("dfs", f"{module}:dfs", options=options, help="pre-order AST tokens (Python ast, else tree-sitter)")
    register("dfs-parent", f"{module}:dfs_parent", options=options, help="pre-order AST tokens with each token's parent")
    register("bfs", f"{module}:bfs", options=options, help="breadth-first AST tokens with each token's parent")
