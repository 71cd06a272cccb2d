"""Built-in vector indexes: exact flat inner product and HNSW (hnswlib)."""
