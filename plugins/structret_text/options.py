"""Options of the product-text extractors (``--option KEY=VALUE`` of ``structret extract``).
Kept apart from them so that listing or checking options never imports nltk or spaCy.

A tagger or a spaCy pipeline object (``NltkNouns(tagger=...)``, ``SpacyNouns(nlp=...)``) is
not an option: Python callers pass it to the class itself."""

from structret.plugin import Names, Options


class NltkNouns(Options):
    """The ``nltk-nouns`` extractor has no options (it uses NLTK's averaged perceptron tagger)."""


class SpacyNouns(Options):
    """Options of ``spacy-nouns``."""

    model: str = "en_core_web_sm"
    """The spaCy pipeline whose tags are read: an installed package or a pipeline directory."""


class TitleOverlap(Options):
    """Options of ``title-overlap``."""

    stopwords: Names | None = None
    """Words never taken, e.g. "the,and"; unset = spaCy's English stop words."""
