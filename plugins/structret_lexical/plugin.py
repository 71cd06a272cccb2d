from structret import hookimpl


@hookimpl
def register_retrievers(register):
    register("bm25", "structret_lexical.bm25:BM25Retriever", options="structret_lexical.options:BM25",
             help="BM25 (bm25s), the classic lexical baseline")
    register("bm25-fields", "structret_lexical.fields:FieldBM25Retriever", options="structret_lexical.options:BM25Fields",
             help="BM25 per field of a function (name, signature, calls, comments, body), weighted sum")
    register("bm25-project", "structret_lexical.fields:ProjectFieldBM25Retriever",
             options="structret_lexical.options:BM25Project",
             help="bm25-fields with a function's place in its project (file path, class, callers): structret index's")
    register("bm25-item-fields", "structret_lexical.fields:ItemFieldBM25Retriever",
             options="structret_lexical.options:BM25ItemFields",
             help="BM25 per field of a catalog item (title, content, each aspect), weighted sum")
