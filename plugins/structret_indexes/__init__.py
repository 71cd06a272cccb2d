"""Built-in vector indexes: exact flat inner product, HNSW (hnswlib) and Milvus (pymilvus)."""
