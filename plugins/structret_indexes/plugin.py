from structret import hookimpl


@hookimpl
def register_indexes(register):
    register("flat", "structret_indexes.flat:FlatIndex", help="exact inner product, chunked (bounded memory)")
    register("hnsw", "structret_indexes.hnsw:HNSWIndex", help="approximate, hnswlib; M, ef_construction, ef")
    register("milvus", "structret_indexes.milvus:MilvusIndex",
             help="Milvus (structret[milvus]): Lite in the index directory, or a server with uri=; index_type FLAT/HNSW/IVF_FLAT")
