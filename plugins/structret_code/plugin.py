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
def register_extractors(register):
    register(
        "python-tokenize",
        "structret_code.extractors:PythonTokenize",
        help="every non-keyword NAME token of Python's tokenize (SANTA's method for Python)",
    )
    register(
        "tree-sitter",
        "structret_code.extractors:TreeSitterIdentifiers",
        help="identifier nodes of any language with an installed tree-sitter grammar (SANTA's method)",
    )
