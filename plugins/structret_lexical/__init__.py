"""Built-in lexical retriever: BM25 (bm25s)."""
