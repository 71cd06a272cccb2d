from structret import hookimpl


@hookimpl
def register_retrievers(register):
    register("bm25", "structret_lexical.bm25:BM25Retriever", options="structret_lexical.options:BM25",
             help="BM25 (bm25s), the classic lexical baseline")
    register("bm25-fields", "structret_lexical.fields:FieldBM25Retriever", options="structret_lexical.options:BM25Fields",
             help="BM25 per field of a function (name, signature, calls, comments, body), weighted sum")
    register("bm25-item-fields", "structret_lexical.fields:ItemFieldBM25Retriever",
             options="structret_lexical.options:BM25ItemFields",
             help="BM25 per field of a catalog item (title, content, each aspect), weighted sum")
