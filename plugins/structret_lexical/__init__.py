"""Built-in lexical retrievers: BM25 (bm25s), and BM25 per field of a function (bm25-fields)."""
