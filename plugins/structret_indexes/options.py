"""Options of the built-in indexes (``--index-option KEY=VALUE``).

Kept apart from the indexes so that listing or checking options never imports numpy, hnswlib
or pymilvus. The dimension and the metric are not options: core passes them to every index.
"""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from structret.plugin import Count, Options


class Flat(Options):
    """Options of ``flat``."""

    chunk_size: Count = 65536
    """Stored vectors scored per step of a search; bounds the memory a search takes."""
    scoring: Literal["auto", "fp32", "bf16"] = "auto"
    """bf16: candidates scored in bf16, then ranked by fp32 scores, the same results (a bound on bf16's
    error certifies each query, or it is searched again in fp32); auto = bf16 where this CPU's bf16
    matmuls run twice as fast as fp32 (AMX), else fp32. bf16 keeps a bf16 copy of the vectors in memory."""


class Graph(Options):
    """What both HNSW indexes (hnswlib's and Milvus's) take."""

    M: Count = 16
    """Links per node of the HNSW graph: more = better recall, more memory."""
    ef_construction: Count = 200
    """Beam width while building the graph: more = a better graph, a slower build."""
    ef: Count = 100
    """Beam width while searching (raised to k when k is larger): more = better recall, slower."""


class HNSW(Graph):
    """Options of ``hnsw``."""

    max_elements: Count | None = None
    """Vectors to make room for at once (capacity grows anyway); unset = a small start."""
    seed: int = 100
    """hnswlib's random seed for the graph's levels."""
    threads: Annotated[int, Field(ge=0)] = 0
    """Threads for adding and for searching a batch of queries; 0 = every core."""


class USearch(Options):
    """Options of ``usearch``."""

    dtype: Literal["f32", "bf16", "i8"] = "f32"
    """How each vector is stored: f32 (4 bytes a coordinate), bf16 (2) or i8 (1). bf16 and i8 scores are
    the metric's value for the rounded vectors; i8 stores unit vectors (metric=ip then takes only unit
    rows, as normalizing encoders such as MiniLM give; metric=cosine takes any) as round(127 x), which
    caps recall@10 near 0.94 on 384-d MiniLM vectors (docs/performance.md): prefer bf16 there."""
    connectivity: Count = 16
    """Links per node of the HNSW graph (usearch's M): more = better recall, more memory."""
    expansion_add: Count = 128
    """Beam width while adding (usearch's ef_construction): more = a better graph, a slower add."""
    expansion_search: Count = 64
    """Beam width while searching (raised to k when k is larger): more = better recall, slower."""
    threads: Annotated[int, Field(ge=0)] = 0
    """Threads for adding and for searching a batch of queries; 0 = every core."""


class Milvus(Graph):
    """Options of ``milvus``."""

    # a database or collection named 2024 on the command line arrives as a number
    model_config = ConfigDict(coerce_numbers_to_str=True)

    index_type: str = "FLAT"
    """FLAT (exact), HNSW (M, ef_construction, ef), IVF_FLAT or IVF_SQ8 (nlist, nprobe); a server takes
    any other Milvus type, with no build parameters. Case does not matter."""
    nlist: Count = 128
    """Clusters of an IVF index."""
    nprobe: Count = 16
    """Clusters an IVF search visits."""
    uri: str | None = None
    """A Milvus server, http://HOST:19530; unset = Milvus Lite inside the index directory."""
    token: str | None = None
    """The server's token; never saved (a loaded index reads STRUCTRET_MILVUS_TOKEN instead)."""
    db_name: str | None = None
    """The server's database (with uri)."""
    collection: str | None = None
    """The collection on the server (with uri); unset = a new structret_<random> one."""
    bm25_k1: Annotated[float, Field(gt=0)] = 1.5
    """BM25's k1 for a hybrid index's lexical side held in Milvus (structret's bm25 default)."""
    bm25_b: Annotated[float, Field(ge=0, le=1)] = 0.75
    """BM25's b for a hybrid index's lexical side held in Milvus (structret's bm25 default)."""
