"""Product entities for masked entity prediction: proper nouns of a description, tied to the title.

SANTA's rule (Appendix A.3, and its released code): the entities of a product description
are its tokens tagged ``NNP``/``NNPS``, plus the description tokens that match (ignoring
case) a token tagged ``NNP``/``NNPS`` in the product's title. ``nltk-nouns`` applies it
with NLTK's tagger as SANTA did, ``spacy-nouns`` with a spaCy pipeline's fine-grained
tags, and ``title-overlap`` is a tagger-free stand-in for machines without tagger data.

All three read the title next to the text: ``extract(description, title=...)``, or
``extract_record(item)`` for an ``ItemRecord`` (spans then point into ``item.content``).
Without a title only the description's own ``NNP``/``NNPS`` tokens are entities (and
``title-overlap`` finds none). A token counts only if it holds a letter or digit: a
stray symbol a tagger calls ``NNP`` is not something to mask.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from structret.errors import PluginError
from structret.records import Entity, ItemRecord

PROPER = ("NNP", "NNPS")
TITLE_MATCH = "title-match"

# tokens -> [(token, tag)], as nltk.pos_tag
Tagger = Callable[[list[str]], list[tuple[str, str]]]
# (start, end, token, tag) of one token, offsets in characters
Tagged = tuple[int, int, str, str]

_OFFLINE_HINT = (
    "To work without a tagger, use the title-overlap extractor (description words that "
    "also occur in the title, no tagger needed)."
)


class _ReadsItems:
    if TYPE_CHECKING:  # each extractor it is mixed into has it
        def extract(self, text: str, language: str | None = None, title: str | None = None) -> list[Entity]: ...

    def extract_record(self, record: ItemRecord) -> list[Entity]:
        """Entities of ``record.content`` (spans into it), with ``record.title`` as the title."""
        return self.extract(record.content, title=record.title)


def _title_rule(description: list[Tagged], title: list[Tagged]) -> list[Entity]:
    """SANTA's rule: the description's NNP/NNPS tokens, and its tokens matching a title NNP/NNPS."""
    proper_in_title = {token.casefold() for _, _, token, tag in title if tag in PROPER}
    entities = []
    for start, end, token, tag in description:
        if not any(c.isalnum() for c in token):
            continue
        if tag in PROPER:
            entities.append(Entity(start, end, token, tag))
        elif token.casefold() in proper_in_title:
            entities.append(Entity(start, end, token, TITLE_MATCH))
    return entities


class NltkNouns(_ReadsItems):
    """SANTA's rule with NLTK: Treebank tokens tagged by NLTK's averaged perceptron tagger.

    ``tagger`` replaces NLTK's tagger (any callable tokens -> [(token, tag)] with Penn
    Treebank tags); without one, NLTK's tagger data must be installed.
    """

    def __init__(self, tagger: Tagger | None = None):
        from nltk.tokenize import TreebankWordTokenizer

        # Treebank tokens are what nltk.word_tokenize gives inside a sentence; word_tokenize
        # itself needs the punkt data, and loses the character offsets.
        self._tokenizer = TreebankWordTokenizer()
        self.tagger = tagger if tagger is not None else _nltk_tagger()

    def extract(self, text: str, language: str | None = None, title: str | None = None) -> list[Entity]:
        """Entities of the description ``text``; ``title`` is the product's title, if known."""
        return _title_rule(self._tagged(text), self._tagged(title) if title else [])

    def _tagged(self, text: str) -> list[Tagged]:
        spans = list(self._spans(text))
        tokens = [text[start:end] for start, end in spans]
        tags = _tags(self.tagger, tokens, "the NLTK tagger")
        return [(start, end, token, tag) for (start, end), token, tag in zip(spans, tokens, tags)]

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        # The Treebank tokenizer splits off only the text's last period ("from Naturtint. Hair"
        # would keep "Naturtint."); word_tokenize splits sentences first, so do that, roughly.
        start = 0
        for boundary in [*_SENTENCE_END.finditer(text), None]:
            end = boundary.start() if boundary else len(text)
            for a, b in self._tokenizer.span_tokenize(text[start:end]):
                yield start + a, start + b
            if boundary:
                start = boundary.end()


class SpacyNouns(_ReadsItems):
    """SANTA's rule with a spaCy pipeline: tokens whose ``tag_`` is ``NNP``/``NNPS``.

    ``model`` is an installed pipeline's name or a path to one; ``nlp`` is a ready
    pipeline (any callable text -> ``spacy.tokens.Doc`` with ``tag_`` set), used instead.
    """

    def __init__(self, model: str = "en_core_web_sm", nlp: Callable | None = None):
        self.model = model
        self.nlp = nlp if nlp is not None else _spacy_pipeline(model)
        self.failures: Counter = Counter()  # texts spaCy cannot take, by reason (one text, not the corpus)

    def extract(self, text: str, language: str | None = None, title: str | None = None) -> list[Entity]:
        """Entities of the description ``text``; ``title`` is the product's title, if known."""
        limit = getattr(self.nlp, "max_length", None)
        if isinstance(limit, int) and max(len(text), len(title or "")) > limit:
            self.failures[f"longer than the spaCy pipeline's max_length ({limit} characters)"] += 1
            return []
        try:
            return _title_rule(self._tagged(text), self._tagged(title) if title else [])
        except UnicodeEncodeError:  # spaCy stores every token as UTF-8, which a lone surrogate is not
            self.failures["a lone surrogate (not encodable as UTF-8)"] += 1
            return []

    def _tagged(self, text: str) -> list[Tagged]:
        doc = self.nlp(text)
        if doc.text != text:  # spans would point at the wrong characters
            raise PluginError(
                f"the spaCy pipeline {self.model!r} changed the text it was given "
                f"({text[:40]!r} came back as {doc.text[:40]!r}); entity spans need the original text"
            )
        return [(token.idx, token.idx + len(token.text), token.text, token.tag_) for token in doc]


class TitleOverlap(_ReadsItems):
    """Description words that also occur in the title: no tagger, works offline.

    A word is a run of letters and digits, compared ignoring case; stop words and words
    of one character are left out. ``stopwords`` replaces spaCy's English stop word list.
    """

    def __init__(self, stopwords: Iterable[str] | None = None):
        if stopwords is None:
            try:
                from spacy.lang.en.stop_words import STOP_WORDS
            except ImportError:
                raise PluginError(
                    "title-overlap takes its stop words from spaCy, which is not installed. "
                    "Install it (pip install spacy) or pass stopwords=[...]"
                ) from None
            stopwords = STOP_WORDS
        self.stopwords = frozenset(word.casefold() for word in stopwords)

    def extract(self, text: str, language: str | None = None, title: str | None = None) -> list[Entity]:
        if not title:
            return []
        in_title = {word.casefold() for word in _WORD.findall(title)}
        entities = []
        for match in _WORD.finditer(text):
            word = match.group()
            key = word.casefold()
            if len(word) >= 2 and key in in_title and key not in self.stopwords:
                entities.append(Entity(match.start(), match.end(), word, TITLE_MATCH))
        return entities


_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")  # letters and digits (any script); "5N" is one word


def _tags(tagger: Tagger, tokens: list[str], who: str) -> list[str]:
    if not tokens:
        return []
    tagged = tagger(tokens)
    if len(tagged) != len(tokens):
        raise PluginError(f"{who} returned {len(tagged)} tags for {len(tokens)} tokens; it must tag every token")
    return [tag for _, tag in tagged]


def _nltk_tagger() -> Tagger:
    import nltk
    from nltk.tag.perceptron import PerceptronTagger

    try:
        tagger = PerceptronTagger()  # what nltk.pos_tag uses for English; loads its data now
    except LookupError:
        searched = ", ".join(nltk.data.path)
        raise PluginError(
            "nltk-nouns needs NLTK's English part-of-speech tagger data "
            "('averaged_perceptron_tagger_eng'), which is not installed "
            f"(searched: {searched}). Install it on a machine with network access: "
            "python -m nltk.downloader averaged_perceptron_tagger_eng ; or copy an nltk_data "
            "directory that holds taggers/averaged_perceptron_tagger_eng to this machine and "
            f"point NLTK_DATA at it. {_OFFLINE_HINT}"
        ) from None
    return tagger.tag


def _spacy_pipeline(model: str):
    import spacy

    try:
        # only the tagger (and what it needs) is used: skip the slow parser and NER
        nlp = spacy.load(model, exclude=["parser", "ner", "lemmatizer", "textcat"])
    except OSError:
        raise PluginError(
            f"spacy-nouns could not load the spaCy pipeline {model!r}: it is neither an installed "
            f"package nor a pipeline directory. Install one with: python -m spacy download "
            f"en_core_web_sm ; or pip install the pipeline's wheel file; or pass model=<path to a "
            f"pipeline directory>. {_OFFLINE_HINT}"
        ) from None
    if not any("token.tag" in nlp.get_pipe_meta(name).assigns for name in nlp.pipe_names):
        raise PluginError(
            f"the spaCy pipeline {model!r} has no tagger (no component sets token.tag_), so it "
            f"finds no NNP/NNPS tokens; use a pipeline with a tagger such as en_core_web_sm. {_OFFLINE_HINT}"
        )
    return nlp
