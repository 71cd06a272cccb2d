from structret import hookimpl


@hookimpl
def register_extractors(register):
    register(
        "nltk-nouns",
        "structret_text.nouns:NltkNouns",
        options="structret_text.options:NltkNouns",
        help="SANTA's product rule with NLTK tags: NNP/NNPS of the description + tokens matching the title's",
    )
    register(
        "spacy-nouns",
        "structret_text.nouns:SpacyNouns",
        options="structret_text.options:SpacyNouns",
        help="SANTA's product rule with a spaCy pipeline's tags (default en_core_web_sm)",
    )
    register(
        "title-overlap",
        "structret_text.nouns:TitleOverlap",
        options="structret_text.options:TitleOverlap",
        help="description tokens (not stop words) that also occur in the title; no tagger, works offline",
    )
