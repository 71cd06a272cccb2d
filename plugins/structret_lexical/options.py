"""Options of the bm25 retriever (``make_retriever("bm25", k1=1.2)``). Kept apart from the
retriever so that listing or checking them never imports bm25s."""

from pydantic import Field

from structret.plugin import Options


class BM25(Options):
    """Options of ``bm25``."""

    k1: float = Field(1.5, ge=0)
    """Term-frequency saturation (bm25s' default; no paper fixes it)."""
    b: float = Field(0.75, ge=0, le=1)
    """Length normalization: 0 = none, 1 = full (bm25s' default)."""
    method: str = "lucene"
    """bm25s' scoring variant: lucene, robertson, atire, bm25l or bm25+."""
    stopwords: str | list[str] | None = "en"
    """Words left out: a language code of bm25s' lists (en), a list of words, or unset for none."""
    lowercase: bool = True
    """Lowercase every token before matching."""
    split_identifiers: bool = True
    """Also index the camelCase / snake_case parts of identifiers (readInput -> read, input)."""


class BM25Fields(BM25):
    """Options of ``bm25-fields``: bm25's, applied to every field, and the fields' weights."""

    weights: str = "name:1,signature:0.5,calls:0,comments:0.25,body:1"
    """FIELD:WEIGHT pairs over name, signature, calls, comments, body, and the place fields a function read as a
    record has (path: its file's stem and last directories; scope: its class or type; callers: the names of the
    functions calling it); score = sum of weight x the field's BM25. The default scored best on the six-language
    corpus' validation split (benchmarks/tune_fields.py)."""


class BM25Project(BM25):
    """Options of ``bm25-project``: bm25-fields' with the place fields weighed in."""

    weights: str = "name:1,signature:0.5,calls:0,comments:0.25,body:1,path:0.5,scope:1,callers:1"
    """FIELD:WEIGHT over bm25-fields' fields. The default (path, scope and callers added to bm25-fields') scored
    best on the whole-project benchmark's validation projects (benchmarks/project_search.py)."""


class BM25ItemFields(BM25):
    """Options of ``bm25-item-fields``: bm25's, applied to every field, and the fields' weights."""

    weights: str = "title:0.25,content:3,aspects:0,aspect.section:0.5"
    """FIELD:WEIGHT over title, content, aspects (every aspect not named) and aspect.NAME (one aspect). The
    default scored best on the Debian catalog's open-half validation split (benchmarks/tune_fields.py)."""
