from structret import hookimpl


@hookimpl
def register_retrievers(register):
    register("bm25", "structret_lexical.bm25:BM25Retriever", options="structret_lexical.options:BM25",
             help="BM25 (bm25s), the classic lexical baseline")
