from structret import hookimpl


@hookimpl
def register_indexes(register):
    register("flat", "structret_indexes.flat:FlatIndex", help="exact inner product, chunked (bounded memory)")
    register("hnsw", "structret_indexes.hnsw:HNSWIndex", help="approximate, hnswlib; M, ef_construction, ef")
