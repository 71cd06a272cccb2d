from structret import hookimpl


@hookimpl
def register_indexes(register):
    options = "structret_indexes.options"  # declared apart: listing them imports no numpy
    register("flat", "structret_indexes.flat:FlatIndex", options=f"{options}:Flat",
             help="exact inner product, chunked (bounded memory)")
    register("hnsw", "structret_indexes.hnsw:HNSWIndex", options=f"{options}:HNSW",
             help="approximate, hnswlib; M, ef_construction, ef")
    register("usearch", "structret_indexes.usearch_index:USearchIndex", options=f"{options}:USearch",
             help="approximate, usearch (structret[usearch]); f32/bf16/i8 vectors, remove by id")
    register("milvus", "structret_indexes.milvus:MilvusIndex", options=f"{options}:Milvus",
             help="Milvus (structret[milvus]): Lite in the index directory, or a server with uri=; index_type FLAT/HNSW/IVF_FLAT")
