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
