"""``structret mine``: turn a source tree into a CodeSearchNet-format corpus.

The language-specific part (finding functions, their docstrings and tokens) is a
*miner* from the plugin registry; everything CodeSearchNet decided on top of that
is here, the same for every language:

* the query is the docstring's first paragraph, tokenized with CodeSearchNet's
  docstring tokenizer (``docstring_tokens``);
* a function is dropped, and counted under the first rule it fails, in this order:
  ``dunder or constructor``, ``standard method`` (``toString``, Ruby ``==`` ...),
  ``'test' in name``, ``no docstring``, ``docstring < 3 tokens`` (of the query),
  ``code < 3 lines`` (non-blank lines of ``code``), ``duplicate code`` (the same
  ``code`` as a function kept before it; the first copy is kept);
* the train/valid/test partition is a hash of the file's path, so every function
  of a file lands in the same split and re-mining gives the same split.

A miner is any object with

``extensions: tuple[str, ...]``
    file suffixes it reads, e.g. ``(".py",)``;
``functions(source: str, path: str) -> list[MinedFunction]``
    the functions of one file in source order. ``source`` is the decoded file with
    ``\\n`` line ends; ``path`` is only for messages. It raises ``SyntaxError``
    (with ``lineno`` set) for a file it cannot parse; ``mine`` skips and counts it.
    The miner marks constructors and the language's special methods (Python's
    ``__repr__``) with ``is_constructor`` / ``is_special``: the first rule drops them;
``standard_methods: frozenset[str]`` (optional)
    method names CodeSearchNet drops as standard extension methods of the
    language (Java ``toString``, JavaScript ``valueOf`` ...).

Inside: ``rules`` (CodeSearchNet's rules and the records above), ``sources`` (the
files of the tree, their text, its commit), ``shards`` (mining in resumable shards and
worker processes) and ``run`` (``mine`` and its report).
"""

from structret.mining.rules import (
    RULE_DUNDER,
    RULE_DUPLICATE,
    RULE_NO_DOC,
    RULE_SHORT_CODE,
    RULE_SHORT_DOC,
    RULE_STANDARD,
    RULE_TEST,
    RULES,
    SPLIT_NAMES,
    MinedFunction,
    Miner,
    docstring_summary,
    drop_rule,
    partition_of,
    tokenize_docstring,
)
from structret.mining.run import MineReport, mine, parse_splits
from structret.mining.shards import DEFAULT_CHUNK_FILES, SHARDS_SUFFIX, Job, mine_file
from structret.mining.walk import DEFAULT_EXCLUDE, git_head

__all__ = [
    "DEFAULT_CHUNK_FILES", "DEFAULT_EXCLUDE", "RULES", "RULE_DUNDER", "RULE_DUPLICATE", "RULE_NO_DOC",
    "RULE_SHORT_CODE", "RULE_SHORT_DOC", "RULE_STANDARD", "RULE_TEST", "SHARDS_SUFFIX", "SPLIT_NAMES",
    "Job", "MineReport", "MinedFunction", "Miner", "docstring_summary", "drop_rule", "git_head", "mine",
    "mine_file", "parse_splits", "partition_of", "tokenize_docstring",
]
