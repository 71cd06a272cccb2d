"""The built-in plugins core uses when a user names none: the one module of core that names a
plugin. Each is a default a command line or a function argument overrides; nothing in core
depends on what the named plugin does (tests/test_architecture.py keeps plugin names out of
every other module of core).
"""

BACKBONE = "minilm"  # the dense model of index, search, bench, serve and train
INDEX = "flat"  # exact search; approximate ones are chosen by name
LEXICAL = "bm25"  # the lexical side of a hybrid, and of bench's baselines
FIELDS_LEXICAL = "bm25-fields"  # bench's code-aware baseline: a function's fields, fused with the backbone
SOURCE_LEXICAL = "bm25-project"  # index-source's lexical side: a function's fields and its place in the project
MINER = "python"  # structret mine, structret bench's corpus
LINEARIZER = "dfs-parent"  # structret linearize
FRESH_BACKBONE = "informed-transformer"  # structret new-model: a backbone trained from scratch
# structret serve, for a model that records no extractor of its own: Python code is marked by the
# first, code of a language named with --language by the second
PYTHON_EXTRACTOR = "python-tokenize"
CODE_EXTRACTOR = "tree-sitter"
OBJECTIVE = "sda"  # a recipe that names none: structure-aware alignment, contrastive
# structret.load_model on a bare model folder: a T5-family config gets the first, any other the second
SEQ2SEQ = "t5"
ENCODER = "hf-encoder"
