"""Options of the dataset readers (``--data-option KEY=VALUE``, a recipe's ``[esci]`` table).

Kept apart from the readers so that listing or checking options never imports pyarrow or
reads a file. The path and the split are not options: core passes them to every reader.
"""

from typing import Annotated, Any, Literal

from pydantic import Field, BeforeValidator, ConfigDict

from structret.plugin import Count, Options
from structret.records import MAX_FIELD_CHARS


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value  # locale=US reads as us


class Reader(Options):
    """What every reader takes."""

    # a path or a name given on the command line as 2024 arrives as a number
    model_config = ConfigDict(coerce_numbers_to_str=True)

    max_field_chars: Count = MAX_FIELD_CHARS
    """Skip (and count) rows with a text field longer than this many characters."""


class CodeSearchNet(Reader):
    """Options of ``codesearchnet``."""

    language: str | None = None
    """Keep only this programming language, e.g. python (case does not matter); unset = every language."""
    code_field: Literal["code", "original_string"] = "code"
    """The document: code = CodeSearchNet's code field (a Python docstring removed, so it cannot give the
    answer away); original_string = the function exactly as written in its file, docstring and all, its
    lines the file's lines (what an index of one's own code holds and shows)."""


class Adv(Reader):
    """Options of ``adv``."""

    code_text: Annotated[Literal["tokens", "raw"], BeforeValidator(_lower)] = "tokens"
    """tokens = ' '.join(code_tokens), as CodeXGLUE scores it; raw = the code string without its docstring."""


class Categories(Reader):
    """What both ESCI readers take; alone, the options of ``esci-santa-pretrain``."""

    categories: str | None = None
    """A .jsonl(.gz) file of product_id, product_locale, categories (1-4 levels, broadest first):
    each product gains the aspects category_1 ... category_4 (see structret_datasets.esci)."""


class ESCI(Categories):
    """Options of ``esci``."""

    version: Annotated[Literal["small", "large"], BeforeValidator(_lower)] = "small"
    """Which of ESCI's versions: small (Task 1, the reranking set) or large."""
    locale: Annotated[Literal["us", "es", "jp", "all"], BeforeValidator(_lower)] = "us"
    """Which market's queries and products; all = every locale (document ids become LOCALE/PRODUCT_ID)."""
    valid_share: float = Field(0.0, ge=0, lt=1)
    """Share of the train split's queries held out as split=valid (by a hash of query_id), as ATTEMPT
    divides ESCI's training set (3.5K of 20.5K queries: 0.17); 0 = no valid split, train is all of it (SANTA)."""


class DebianPackages(Reader):
    """Options of ``debian-packages``."""

    translations: str | None = None
    """A Translation-en file or a folder of them; unset = those beside the Packages files when the path
    is a folder; none = read no translations."""
    limit: Count | None = None
    """Stop after this many packages are used; unset = all."""
    half: Literal["open", "reserved", "both"] = "open"
    """Which half of the catalog queries, positives and training items come from: open (train, tune and
    select here), reserved (sha1(name) starting 0-7: kept for evaluation, split=test only), both (reading the
    whole catalog; not for training, tuning or selection)."""
