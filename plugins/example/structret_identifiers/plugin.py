from structret import hookimpl


@hookimpl
def register_extractors(register):
    register(
        "regex-identifiers",
        "structret_identifiers.extract:RegexIdentifiers",
        options="structret_identifiers.options:RegexIdentifiers",
        help="identifiers found by a regular expression (any language, no parser needed)",
    )


@hookimpl
def register_retrievers(register):
    register(
        "identifier-overlap",
        "structret_identifiers.overlap:IdentifierOverlap",
        options="structret_identifiers.options:IdentifierOverlap",
        help="IDF-weighted overlap of query words with a document's identifier sub-tokens",
    )


@hookimpl
def register_objectives(register):
    register(
        "margin-nce",
        "structret_identifiers.margin:MarginNCE",
        options="structret_identifiers.options:MarginNCE",  # its own options: [margin-nce] margin = 0.3
        help="in-batch contrastive loss whose positive must win by an additive margin (AM-Softmax)",
    )
