"""The data types every reader produces and every pipeline stage consumes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Union


@dataclass
class CodeRecord:
    """One function: the document of code search."""

    id: str
    code: str
    language: str
    docstring: str = ""
    func_name: str = ""
    repo: str = ""
    path: str = ""
    url: str = ""
    code_tokens: list[str] = field(default_factory=list)
    docstring_tokens: list[str] = field(default_factory=list)
    # where the query came from when not a docstring: structret mine --structure-pairs' pair_kind
    pair_kind: str = ""

    def text(self) -> str:
        return self.code


@dataclass
class ItemRecord:
    """One item of a catalog (a product, a package): title, content and aspects."""

    id: str
    title: str = ""
    content: str = ""
    bullets: list[str] = field(default_factory=list)
    aspects: dict[str, list[str]] = field(default_factory=dict)
    locale: str = ""

    def text(self) -> str:
        return f"{self.title} {self.content}".strip()


@dataclass
class TextRecord:
    """A plain passage (BEIR-style corpora)."""

    id: str
    text_: str
    title: str = ""

    def text(self) -> str:
        return f"{self.title} {self.text_}".strip() if self.title else self.text_


Record = Union[CodeRecord, ItemRecord, TextRecord]


@dataclass(frozen=True)
class Unit:
    """A piece of a source file that search returns: lines ``start`` to ``end`` (1-based, inclusive) and their
    text; ``kind`` (function, method, class, ..., code between definitions, text, or ``KIND-part`` for a piece
    of a unit split at the size cap), the ``name`` it defines and its enclosing definition's qualified name."""

    start: int
    end: int
    text: str
    kind: str = "code"
    name: str = ""
    parent: str = ""
    language: str = ""

    @property
    def qualified(self) -> str:
        """``parent.name`` (``Client.get``), the name alone, or the parent for code inside a definition."""
        return f"{self.parent}.{self.name}" if self.parent and self.name else self.name or self.parent


@dataclass
class Query:
    id: str
    text: str
    aspects: dict[str, list[str]] = field(default_factory=dict)


# query id -> document id -> graded relevance label (an int level; gains are mapped at scoring time)
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Entity:
    """A character span ``text[start:end]`` of the original text."""

    start: int
    end: int
    text: str
    kind: str = ""


@dataclass
class Sequence:
    """A linearized record: tokens and, optionally, each token's parent index (-1 = root)."""

    tokens: list[str]
    parents: list[int] | None = None


# The default limit on one text field of a row (readers' option max_field_chars); a longer
# field is a pathology (a data dump pasted into one function, a runaway concatenation), not
# a record, and one such row can cost the memory and encoding time of a whole corpus. No real
# record of the supported corpora comes near it: the longest of 325,967 Python functions in
# the standard library plus torch, transformers, scipy and sympy is a generated benchmark of
# 425,662 characters; the longest field of Debian bookworm's 63,440 amd64 packages is
# 75,639; an ESCI product description is listing text of a few thousand characters. It is
# defined here, not in a reader plugin, because every reader applies it.
MAX_FIELD_CHARS = 1_000_000


@dataclass(frozen=True)
class Span:
    """One field of a text: its name and the span ``text[start:end]`` it covers."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Layout:
    """A text a linearizer wrote, read back into named fields (its ``fields(text)``, for
    ``structret serve``'s page): ``body`` is the free text (a description, code) that entity marks
    are shown on, ``fields`` the short ones (aspects, a title)."""

    kind: str  # the linearizer's name; "" for a text shown as it is
    fields: tuple[Span, ...] = ()
    body: Span | None = None


@dataclass(frozen=True)
class PooledEncoder:
    """A backbone's vectors as one transformer encoder forward, pooled, maybe normalised: what
    ``structret export`` writes as a sentence-transformers folder or an ONNX graph. A backbone
    gives it from ``pooled_encoder()`` (contracts.OPTIONAL) when its vectors are exactly that."""

    module: Any  # a transformers model: (input_ids, attention_mask[, token_type_ids]) -> last_hidden_state
    tokenizer: Any  # its transformers (fast) tokenizer
    pooling: str  # "cls" (the first token) or "mean" (over the attention mask)
    normalize: bool  # vectors scaled to unit length
    max_length: int  # tokens per text, longer texts are cut


@dataclass
class ReadStats:
    """Counts of what a reader read, used and skipped; read == used + skipped, always."""

    source: str = ""
    used: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    max_examples: int = 5

    @property
    def read(self) -> int:
        return self.used + sum(self.skipped.values())

    def use(self, n: int = 1) -> None:
        self.used += n

    def skip(self, where: str, reason: str, detail: str = "") -> None:
        """Count a skipped row; ``where`` is ``file:line``, ``reason`` a short category.
        ``detail`` (this row's own numbers, e.g. its size) goes only into the example line,
        so that rows of one kind still add up under one reason."""
        self.skipped[reason] += 1
        if len(self.examples) < self.max_examples:
            self.examples.append(f"{where}: {reason}" + (f" ({detail})" if detail else ""))

    def leave_out(self, reason: str, n: int = 1) -> None:
        """Count rows left out by choice (another split, locale, ...): no example line,
        since they are not faults and would crowd real problems out of ``examples``."""
        self.skipped[reason] += n

    def summary(self) -> str:
        total_skipped = sum(self.skipped.values())
        line = f"{self.source or 'input'}: read {self.read} rows = {self.used} used + {total_skipped} skipped"
        if total_skipped:
            reasons = ", ".join(f"{r}: {n}" for r, n in self.skipped.most_common())
            line += f" ({reasons})"
            if self.examples:
                line += "; first skipped: " + "; ".join(self.examples)
        return line


# The tasks of the built-in readers (``Dataset.task``). Each names the evaluation protocol
# registered under it through the ``register_protocols`` hook (structret.evaluation).
CODE_SEARCH = "code-search"  # one aligned document per query: full pool + CSN-999 MRR
GRADED_RERANK = "graded-rerank"  # graded judgements (ESCI): rerank each query's judged documents
QRELS_RANKING = "qrels-ranking"  # any qrels (BEIR, Debian test): rank the whole corpus
MULTI_ANSWER_RANKING = "multi-answer-ranking"  # several answers per query (CoSQA+): MMRR beside nDCG@10
COIR_RANKING = "coir-ranking"  # a CoIR task: the whole corpus ranked, nDCG@10 exactly as CoIR computes it
PRETRAINING = "pretraining"  # a corpus to train on, nothing to evaluate (no protocol has this name)


@dataclass
class Dataset:
    """A retrieval dataset: a corpus, queries, graded qrels, and how it was read.

    ``pairs`` lists (query id, document id) in file order for datasets where each
    query comes with exactly one aligned document (code search); protocols such as
    CodeSearchNet's 999-distractor MRR need that order.

    ``task`` names how the data is evaluated: the evaluation protocol registered under
    that name (``CODE_SEARCH``, ``GRADED_RERANK``, ``QRELS_RANKING`` or a plugin's own).
    A reader written before tasks leaves it ``None``; the task is then inferred from
    the fields (``structret.evaluation.task_of``).
    """

    name: str
    corpus: Mapping[str, Record]  # each reader builds a dict of its own kind of record
    queries: dict[str, Query]
    qrels: Qrels
    stats: ReadStats
    pairs: list[tuple[str, str]] | None = None
    # names of the label levels, e.g. {3: "E", 2: "S", 1: "C", 0: "I"} for ESCI
    labels: dict[int, str] | None = None
    default_gains: str | None = None
    # the measures a paper reports on this data (ir-measures names, e.g. ["R@100", "nDCG@50"]);
    # None: the protocol's defaults
    metrics: list[str] | None = None
    task: str | None = None
    # (spec, split, reader options) when read by structret.load_dataset, so that another split
    # of the same data can be read (build_index, evaluate) and train can be given the spec
    source: tuple[str, str | None, dict] | None = None
    # query id -> ids of its hard negatives in ``corpus``, in the reader's order (Tevatron
    # lines carry them); training draws from them with negatives = N
    negatives: dict[str, list[str]] = field(default_factory=dict)
