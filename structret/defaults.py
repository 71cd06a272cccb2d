"""The built-in plugins core uses when a user names none: the one module of core that names a
plugin. Each is a default a command line or a function argument overrides; nothing in core
depends on what the named plugin does (tests/test_architecture.py keeps plugin names out of
every other module of core).
"""

BACKBONE = "minilm"  # the dense model of index, search, bench, serve and train
# "auto" (not a plugin): the index chosen by the number of vectors, where it was measured to search faster
# at recall@10 >= 0.98 (docs/performance.md, "ANN at 1M vectors"): exact search below ANN_FROM; from there
# the HNSW graph (100k real MiniLM vectors: recall 0.9925, 10x flat one query at a time, 1.9x batched;
# 1M made like real ones: 0.983, 148x and 21x). Beyond 1M its recall was not measured.
AUTO = "auto"
INDEX = AUTO
EXACT_INDEX = "flat"
ANN_FROM = 100_000
ANN_INDEX = "hnsw"
ANN_OPTIONS = {"M": 16, "ef": 300}
LEXICAL = "bm25"  # the lexical side of a hybrid, and of bench's baselines
FIELDS_LEXICAL = "bm25-fields"  # bench's code-aware baseline: a function's fields, fused with the backbone
SOURCE_LEXICAL = "bm25-project"  # index-source's lexical side: a function's fields and its place in the project
CHUNKER = "syntax"  # how index-source cuts files into units: every line of 19 languages and of text files
MINER = "python"  # structret mine, structret bench's corpus
LINEARIZER = "dfs-parent"  # structret linearize
FRESH_BACKBONE = "informed-transformer"  # structret new-model: a backbone trained from scratch
# structret serve, for a model that records no extractor of its own: Python code is marked by the
# first, code of a language named with --language by the second
PYTHON_EXTRACTOR = "python-tokenize"
CODE_EXTRACTOR = "tree-sitter"
OBJECTIVE = "sda"  # a recipe that names none: structure-aware alignment, contrastive
# structret.load_model on a bare model folder: a T5-family config gets the first, a static table
# (model2vec's config, model_type "model2vec") the second, any other the third
SEQ2SEQ = "t5"
STATIC = "static"
ENCODER = "hf-encoder"

# how an index of a source folder fuses its sides, and the ranking rules (structret.search.ranking) it
# records, lexical or hybrid: chosen on semble's 18 validation repositories (docs/results.md, "Searching any
# project in any language"); a trained run's recipe fusion still wins over SOURCE_FUSION
SOURCE_FUSION = "zscore:0.5"
RANKING = {
    "lexical": {"definition": 2.0, "stem": 3.0, "penalty": 0.5, "saturation": 0.5, "coherence": 1.0, "embedded": 1.0},
    "hybrid": {"definition": 2.0, "stem": 3.0, "penalty": 0.5, "saturation": 0.5, "coherence": 1.0, "embedded": 1.0,
               "symbol_weight": 1.0},
}
