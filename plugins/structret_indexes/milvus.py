"""Milvus through pymilvus: Milvus Lite kept inside the index directory, or a Milvus server.

pymilvus and milvus-lite are optional (``pip install 'structret[milvus]'``) and imported
only when an index is created or loaded, so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from structret.plugin import atomic_dir, write_meta
from structret.errors import ArtifactError, PluginError, StructretError
from structret.plugin import (
    IndexInputError,
    as_matrix,
    base_meta,
    check_ids,
    check_k,
    check_metric,
    check_removal,
    normalize_rows,
    read_ids,
    read_index_meta,
    write_ids,
)

# Milvus Lite's data directory inside a saved index; pymilvus only treats a URI ending in
# ".db" as a local Lite database
DB_DIR = "milvus.db"
TOKEN_ENV = "STRUCTRET_MILVUS_TOKEN"
LITE_COLLECTION = "structret"
EXACT_TYPES = ("FLAT", "BRUTE_FORCE")
# Lite accepts any type when the collection is created and fails only when it builds the
# index, long after; a server checks at once and knows more types (DISKANN, IVF_PQ ...)
LITE_TYPES = (*EXACT_TYPES, "HNSW", "HNSW_SQ", "IVF_FLAT", "IVF_SQ8", "AUTOINDEX")
_PK, _VECTOR = "pk", "vector"
# a hybrid index's lexical side: each row's terms (set_texts) and the sparse vector Milvus's BM25 Function
# makes of them. Every collection has both (an empty text until set_texts): whether an index is hybrid is
# decided after its vectors are added, and Milvus cannot add a Function to a collection later
_TEXT, _SPARSE = "text", "sparse"
# a lexical side of several fields (bm25-fields: name, signature, body, ...) holds each field in a slot of its own,
# a text field and its BM25 Function's sparse field; slot 0 is named as a one-field collection names it
_SLOTS = 8


def _digest(texts: Sequence[str]) -> int:
    """A row's lexical texts as one nonzero 64-bit number (0 stands for "not known" in the saved file)."""
    value = int.from_bytes(hashlib.blake2b("\x00".join(texts).encode("utf-8"), digest_size=8).digest(), "little")
    return value or 1


def _read_digests(path: str | os.PathLike, pks: Sequence[int]) -> dict[int, int]:
    """The saved digests by primary key; none (every row written by the next set_texts) where the file is
    missing (an index saved before they were kept) or does not fit the keys."""
    file = Path(path) / TEXT_DIGESTS_FILE
    try:
        digests = np.load(file, allow_pickle=False) if file.is_file() else None
    except (OSError, ValueError):
        digests = None
    if digests is None or digests.shape != (len(pks),):
        return {}
    return {pk: int(d) for pk, d in zip(pks, digests.tolist()) if d}


def _slot(n: int) -> tuple[str, str]:
    return (_TEXT, _SPARSE) if n == 0 else (f"{_TEXT}_{n}", f"{_SPARSE}_{n}")


_MAX_TEXT = 65535  # bytes: Milvus's longest VARCHAR
# a Milvus server refuses a larger topk; Lite has no such limit, but an index must not
# work on a laptop and then fail on the cluster
_MAX_K = 16384
# bytes of vectors per insert or search request, well under a server's 64 MB gRPC limit
_REQUEST_BYTES = 16 << 20
# primary keys per delete request (a server's expression is parsed whole)
_DELETE_KEYS = 16384
# the rows' primary keys, in ids.json's order; left out while they are the positions 0..n-1 (nothing
# removed: the layout of an index saved before remove existed)
PKS_FILE = "pks.npy"
# a digest of the lexical texts each row holds, in ids.json's order (0: not known): set_texts writes only
# the rows whose texts changed, since an update gives every row's fields again (callers move with others)
TEXT_DIGESTS_FILE = "text_digests.npy"


class MilvusError(StructretError):
    """Milvus (server or Lite) refused or failed an operation."""


def _pymilvus(lite: bool):
    try:
        import pymilvus
    except ImportError:
        raise PluginError(
            "index 'milvus' needs pymilvus, which is not installed. Install it with: "
            "pip install 'structret[milvus]'"
        ) from None
    if lite:
        try:
            import milvus_lite  # noqa: F401
        except ImportError:
            raise PluginError(
                "index 'milvus' without uri= runs Milvus Lite, which needs the milvus-lite package. "
                "Install it with: pip install 'structret[milvus]' (or pass uri=http://HOST:19530 "
                "to use a Milvus server)."
            ) from None
    return pymilvus


def _check_uri(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https", "tcp", "unix"):
        raise IndexInputError(
            f"uri {uri!r} is not a Milvus server address; give one like http://HOST:19530. "
            f"Without uri the index runs Milvus Lite inside the saved index directory."
        )
    if parsed.username or parsed.password:
        # the uri is written to structret.json, so it must not carry a secret
        raise IndexInputError(
            f"uri {parsed.scheme}://{parsed.hostname}... carries credentials; remove them and put "
            f"the token (user:password or an API key) in the environment variable {TOKEN_ENV}."
        )
    return uri


@contextlib.contextmanager
def _milvus_errors(where: str, doing: str) -> Iterator[None]:
    from pymilvus.exceptions import MilvusException

    try:
        yield
    except MilvusException as exc:
        raise MilvusError(f"Milvus at {where} failed to {doing}: {exc}") from None


WORKDIR_PREFIX = "structret-milvus-"


def _working_copy() -> Path:
    """A new private folder for Lite's engine, named for this process; first, the folders of processes
    that died without releasing theirs (killed: no finalizer ran) are deleted, so a killed
    ``structret serve`` does not leave a copy of its index behind each time."""
    root = Path(tempfile.gettempdir())
    for stale in root.glob(f"{WORKDIR_PREFIX}*-*"):
        pid = stale.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (PermissionError), or a platform without signal 0: kept
        return True
    return True


def _release(state: dict) -> None:
    """Close the connection and, for Lite, stop its engine and delete the working copy."""
    client = state.pop("client", None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
    if state.get("workdir"):
        with contextlib.suppress(ImportError):  # without milvus-lite no engine was started
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(state["db"])
        shutil.rmtree(state.pop("workdir"), ignore_errors=True)


class MilvusIndex:
    """A Milvus collection; scores are inner products (cosine: of unit vectors), as in FlatIndex.

    Without ``uri`` the index is Milvus Lite: an embedded engine working in a private
    temporary directory; ``save`` copies its database into the index directory and
    ``load`` copies it out again, so using a loaded index never changes what was saved.

    With ``uri=http://HOST:19530`` (plus ``db_name``, ``collection``) the vectors live in a
    collection on that Milvus server; ``save`` writes the ids and where the collection is,
    ``load`` reconnects. The token is ``token=`` or the environment variable
    ``STRUCTRET_MILVUS_TOKEN``, and is never written to disk (load reads only the variable).
    The collection is not a snapshot: adding to a loaded index changes what the saved
    directory points to, and loading the directory again then fails until it is re-saved.

    ``index_type``: ``FLAT`` (exact, the default), ``HNSW`` (``M``, ``ef_construction``,
    ``ef``, raised to k when k is larger), ``IVF_FLAT`` / ``IVF_SQ8`` (``nlist``,
    ``nprobe``); any other Milvus type is passed through with no build parameters. Milvus
    searches recent vectors exhaustively and builds an approximate type's index only when
    it seals them (on save, or once enough have arrived), so an approximate index's results
    can change then; a saved one always searches the same way.
    """

    name = "milvus"

    def __init__(
        self,
        dim: int,
        metric: str = "ip",
        index_type: str = "FLAT",
        M: int = 16,
        ef_construction: int = 200,
        ef: int = 100,
        nlist: int = 128,
        nprobe: int = 16,
        uri: str | None = None,
        token: str | None = None,
        db_name: str | None = None,
        collection: str | None = None,
        bm25_k1: float = 1.5,
        bm25_b: float = 0.75,
    ):
        self._configure(dim, metric, index_type, M, ef_construction, ef, nlist, nprobe, uri, db_name, collection,
                        bm25_k1, bm25_b)
        self._connect(token, create=True)
        self._slots = _SLOTS

    def _configure(self, dim, metric, index_type, M, ef_construction, ef, nlist, nprobe, uri, db_name, collection,
                   bm25_k1=1.5, bm25_b=0.75):
        if int(dim) < 1:
            raise IndexInputError(f"dim must be a positive number of dimensions, got {dim}.")
        for option, value in (("M", M), ("ef_construction", ef_construction), ("ef", ef),
                              ("nlist", nlist), ("nprobe", nprobe)):
            if int(value) < 1:
                raise IndexInputError(f"{option} must be at least 1, got {value}.")
        if uri is None and (db_name or collection):
            raise IndexInputError(
                "db_name and collection name a database and collection on a Milvus server; give uri= "
                "too (http://HOST:19530). Milvus Lite keeps one collection inside the index directory."
            )
        if uri is None and str(index_type).upper() not in LITE_TYPES:
            raise IndexInputError(
                f"Milvus Lite has no index_type {index_type!r}; use one of {', '.join(LITE_TYPES)} "
                f"(or a Milvus server, uri=http://HOST:19530, for its other types)."
            )
        self.dim = int(dim)
        self.metric = check_metric(metric)
        self.index_type = str(index_type).upper()
        self.M, self.ef_construction, self.ef = int(M), int(ef_construction), int(ef)
        self.nlist, self.nprobe = int(nlist), int(nprobe)
        self.bm25_k1, self.bm25_b = float(bm25_k1), float(bm25_b)
        # lexical slots the collection has: _SLOTS, 1 in one saved when Milvus held one BM25 field, 0 before hybrid
        self._slots = 0
        self.lexical_fields: list[str] = []  # the field each slot holds, in slot order (set_texts)
        self.texts_cut = 0  # texts longer than Milvus holds, cut at a term (set_texts)
        self.texts_written = 0  # rows the last set_texts wrote (the others held those texts already)
        self.uri = None if uri is None else _check_uri(str(uri))
        # str(): --index-option turns a name like 2024 into a number
        self.db_name = str(db_name) if db_name else None
        self.collection = str(collection) if collection else (
            LITE_COLLECTION if uri is None else f"structret_{uuid.uuid4().hex}")
        self._ids: list[str] = []
        self._id_set: set[str] = set()
        # each row's primary key, in insertion order, and the other way round; keys only grow, so a
        # key's order is insertion order (how ties rank) and a removed one is never reused
        self._pks: list[int] = []
        self._id_of: dict[int, str] = {}
        self._next_pk = 0
        self._digests: dict[int, int] = {}  # primary key -> digest of the texts set_texts gave it
        self._state: dict = {}
        self._finalizer = weakref.finalize(self, _release, self._state)

    @property
    def exact(self) -> bool:
        """True for index types that find the true top k (the contract suite checks recall 1.0)."""
        return self.index_type in EXACT_TYPES

    @property
    def _where(self) -> str:
        if self.uri is None:
            return f"Milvus Lite ({self._state.get('db')})"
        return f"{self.uri} (database {self.db_name or 'default'}, collection {self.collection})"

    def _connect(self, token: str | None, *, create: bool, lite_db: Path | None = None) -> None:
        """Open the client; a new index also creates its collection."""
        pymilvus = _pymilvus(lite=self.uri is None)
        if self.uri is None:
            if lite_db is None:
                workdir = _working_copy()
                lite_db = workdir / DB_DIR
                self._state["workdir"] = str(workdir)
            self._state["db"] = str(lite_db)
            with _milvus_errors(self._where, "open its database"):
                self._state["client"] = pymilvus.MilvusClient(str(lite_db))
        else:
            token = token or os.environ.get(TOKEN_ENV, "")
            with _milvus_errors(self._where, f"connect (is the server running? token from {TOKEN_ENV})"):
                self._state["client"] = pymilvus.MilvusClient(uri=self.uri, token=token, db_name=self.db_name or "")
        if create:
            self._create_collection(pymilvus)
        else:
            with _milvus_errors(self._where, "load the collection"):
                if self._client.has_collection(self.collection):  # a missing one is reported by load
                    self._client.load_collection(self.collection)

    @property
    def _client(self):
        if "client" not in self._state:
            raise MilvusError(f"this milvus index ({self._where}) is closed; load it again from its directory.")
        return self._state["client"]

    def _create_collection(self, pymilvus) -> None:
        client = self._client
        with _milvus_errors(self._where, "list its collections"):
            exists = client.has_collection(self.collection)
        if exists:
            raise IndexInputError(
                f"collection {self.collection!r} already exists on {self.uri}; a new index needs its own. "
                f"Pick another with collection=NAME, or load the index directory that was saved with it."
            )
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        # the primary key is a number given in insertion order; the string ids stay in ids.json, as in the
        # other indexes (a VARCHAR key would hold them, at a server's length limit and a copy per segment)
        schema.add_field(_PK, pymilvus.DataType.INT64, is_primary=True)
        schema.add_field(_VECTOR, pymilvus.DataType.FLOAT_VECTOR, dim=self.dim)
        # terms as structret's BM25 splits them (a retriever's terms()), so the standard analyzer (all Lite
        # has: lowercase, split at word boundaries) sees readInputFile's parts too
        for n in range(_SLOTS):
            text, sparse = _slot(n)
            schema.add_field(text, pymilvus.DataType.VARCHAR, max_length=_MAX_TEXT, enable_analyzer=True,
                             analyzer_params={"type": "standard"}, default_value="")
            schema.add_field(sparse, pymilvus.DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(pymilvus.Function(name="bm25" if n == 0 else f"bm25_{n}",
                                                  function_type=pymilvus.FunctionType.BM25,
                                                  input_field_names=[text], output_field_names=[sparse]))
        params = client.prepare_index_params()
        build = self._build_params()
        # pymilvus 3 sends build parameters as separate keys, which Milvus Lite 3.2 ignores: it
        # reads only the older JSON "params" key, which servers still accept as well
        params.add_index(field_name=_VECTOR, index_type=self.index_type, metric_type="IP",
                         params={**build, "params": build} if build else {})
        bm25 = {"bm25_k1": self.bm25_k1, "bm25_b": self.bm25_b}
        for n in range(_SLOTS):
            params.add_index(field_name=_slot(n)[1], index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                             params={**bm25, "params": bm25})
        with _milvus_errors(self._where, f"create a {self.index_type} collection"):
            # Strong: a search right after an add must see it (a server defaults to Bounded)
            client.create_collection(self.collection, schema=schema, consistency_level="Strong")
            # sync=False: there is nothing to build yet, and waiting polls every 0.5 s
            client.create_index(self.collection, params, sync=False)
            client.load_collection(self.collection)

    def _build_params(self) -> dict[str, Any]:
        if self.index_type.startswith("HNSW"):
            return {"M": self.M, "efConstruction": self.ef_construction}
        if self.index_type.startswith("IVF"):
            return {"nlist": self.nlist}
        return {}

    def _search_params(self, k: int) -> dict[str, Any]:
        if self.index_type.startswith("HNSW"):
            return {"ef": max(self.ef, k)}  # a beam narrower than k cannot return k results
        if self.index_type.startswith("IVF"):
            return {"nprobe": self.nprobe}
        return {}

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def close(self) -> None:
        """Release the connection (and Lite's engine and working copy); a saved index is kept."""
        self._finalizer()

    def _rows_per_request(self) -> int:
        return max(1, _REQUEST_BYTES // (4 * self.dim))

    def add(self, ids: Sequence[str], vectors: Any) -> None:
        vectors = as_matrix(vectors, self.dim)
        ids = check_ids(ids, len(vectors), self._id_set)
        if not ids:
            return
        if self.metric == "cosine":
            vectors = normalize_rows(vectors)
        start, step = self._next_pk, self._rows_per_request()
        if self.uri is not None:
            # rows an interrupted update left on the server under keys this index has not handed out (its
            # folder was never swapped in) would come back under no id, and a server keeps both copies of
            # a key inserted twice; a Lite working copy dies with its process
            with _milvus_errors(self._where, "clear keys not yet handed out"):
                self._client.delete(self.collection, filter=f"{_PK} >= {start}")
        try:
            for offset in range(0, len(vectors), step):
                rows = [{_PK: start + offset + i, _VECTOR: vector}
                        for i, vector in enumerate(vectors[offset : offset + step])]
                with _milvus_errors(self._where, f"insert {len(rows)} vectors"):
                    self._client.insert(self.collection, rows)
        except BaseException:
            # the next add reuses these keys; rows left from a failed one would come back from
            # searches under the wrong ids
            with contextlib.suppress(Exception):
                self._client.delete(self.collection, filter=f"{_PK} >= {start}")
            raise
        pks = range(start, start + len(ids))
        self._ids.extend(ids)
        self._id_set.update(ids)
        self._pks.extend(pks)
        self._id_of.update(zip(pks, ids))
        self._next_pk = start + len(ids)

    def remove(self, ids: Sequence[str]) -> None:
        """Drop ``ids`` (contracts.OPTIONAL["index"]["remove"]): deleted from the collection by primary key."""
        drop = set(check_removal(ids, self._id_set))
        if not drop:
            return
        gone = [pk for pk, i in zip(self._pks, self._ids) if i in drop]
        deleted: list[int] = []
        try:
            for offset in range(0, len(gone), _DELETE_KEYS):
                chunk = gone[offset : offset + _DELETE_KEYS]
                with _milvus_errors(self._where, f"delete {len(chunk)} vectors"):
                    self._client.delete(self.collection, ids=chunk)
                deleted.extend(chunk)
        finally:
            # what Milvus deleted is gone here too, even if a later request failed: never an id
            # whose vector is no longer there
            done = set(deleted)
            kept = [(pk, i) for pk, i in zip(self._pks, self._ids) if pk not in done]
            self._pks, self._ids = [pk for pk, _ in kept], [i for _, i in kept]
            for pk in done:
                self._id_set.discard(self._id_of.pop(pk))
                self._digests.pop(pk, None)

    def _prepared(self, queries: Any, k: int) -> tuple[np.ndarray, int]:
        """The queries as a checked matrix (unit rows for cosine), and k cut to the index's size."""
        k = check_k(k)
        queries = as_matrix(queries, self.dim, "queries")
        if self.metric == "cosine":
            queries = normalize_rows(queries)
        k = min(int(k), len(self))
        if k > _MAX_K:
            raise IndexInputError(f"Milvus returns at most {_MAX_K} results per query; ask for k <= {_MAX_K} "
                                  f"(got {k}).")
        return queries, k

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] best first and their ids; k' = min(k, len(self)).

        Equal scores are ranked by insertion order, as in FlatIndex; which of several vectors
        tied at the k-th score make the cut is Milvus's choice.
        """
        queries, k = self._prepared(queries, k)
        scores = np.empty((len(queries), k), dtype=np.float32)
        rows = np.empty((len(queries), k), dtype=np.int64)
        if k == 0 or len(queries) == 0:
            return scores, [[] for _ in queries]
        step = self._rows_per_request()
        for start in range(0, len(queries), step):
            block = queries[start : start + step]
            with _milvus_errors(self._where, f"search {len(block)} queries"):
                found = self._client.search(
                    self.collection, data=list(block), limit=k, anns_field=_VECTOR, output_fields=[_PK],
                    search_params={"metric_type": "IP", "params": self._search_params(k)},
                )
            for i, hits in enumerate(found, start):
                if len(hits) < k:
                    raise IndexInputError(
                        f"Milvus {self.index_type} search found {len(hits)} of k={k} neighbours; "
                        f"raise ef (now {self.ef}) or nprobe (now {self.nprobe}), or use index_type=FLAT."
                    )
                row_scores = np.array([hit["distance"] for hit in hits], dtype=np.float32)
                row_pks = np.array([hit[_PK] for hit in hits], dtype=np.int64)
                # Milvus orders equal scores arbitrarily; by key (insertion order) they rank as in FlatIndex
                order = np.lexsort((row_pks, -row_scores))
                scores[i], rows[i] = row_scores[order], row_pks[order]
        return scores, [self._ids_of(row) for row in rows.tolist()]

    def _ids_of(self, pks: Sequence[int]) -> list[str]:
        try:
            return [self._id_of[pk] for pk in pks]
        except KeyError as exc:
            raise ArtifactError(f"{self._where} returned a row with key {exc}, which this index does not hold "
                                f"(the collection was changed by something else?); rebuild the index.") from None

    def set_texts(self, ids: Sequence[str], fields: Mapping[str, Sequence[str]]) -> None:
        """Give ids already added their lexical fields for Milvus's BM25 (contracts.OPTIONAL["index"]["set_texts"]):
        ``fields`` maps each field's name to one text of terms per id; each field goes to a slot of its own (a
        text field and the sparse field its BM25 Function fills), replaced in place by a partial upsert (Milvus
        >= 2.6, Lite 3.x). A row whose texts are those it already holds is not written again (``texts_written``
        counts the rows that were). A text over Milvus's 65,535 bytes is cut at a term (counted in ``texts_cut``)."""
        if not self._slots:
            raise MilvusError(f"{self._where} was made by an earlier structret, without the fields a lexical side "
                              f"needs; rebuild the index to make it hybrid on Milvus.")
        if len(fields) > self._slots:
            raise IndexInputError(
                f"set_texts: {len(fields)} lexical fields ({', '.join(fields)}), but {self._where} holds at most "
                f"{self._slots}" + (" (made by an earlier structret: rebuild it to hold more)" if self._slots < _SLOTS
                                    else "; weigh fewer fields (a retriever's weights of 0 leave a field out)."))
        for name, texts in fields.items():
            if len(texts) != len(ids):
                raise IndexInputError(f"set_texts: {len(ids)} ids but {len(texts)} texts of field {name!r}; give "
                                      f"one text per id.")
        pk_of = dict(zip(self._ids, self._pks))
        missing = [i for i in ids if i not in pk_of]
        if missing:
            raise IndexInputError(f"set_texts: {len(missing)} ids are not in the index (e.g. {missing[0]!r}); add "
                                  f"their vectors first.")
        if list(fields) != self.lexical_fields:
            self._digests.clear()  # the slots now hold other fields: every row is written
        # a slot no field names any more is emptied, so that nothing of an earlier field is searched
        slots = [_slot(n)[0] for n in range(self._slots)]
        columns = [list(texts) for texts in fields.values()] + [[""] * len(ids)] * (len(slots) - len(fields))
        rows, size, cut, written = [], 0, 0, 0
        for n, i in enumerate(ids):
            texts = [column[n] for column in columns]
            digest = _digest(texts)
            if self._digests.get(pk_of[i]) == digest:
                continue
            row: dict[str, Any] = {_PK: pk_of[i]}
            for slot, text in zip(slots, texts):
                data = text.encode("utf-8")
                if len(data) > _MAX_TEXT:
                    text = data[:_MAX_TEXT].decode("utf-8", "ignore").rsplit(" ", 1)[0]
                    cut += 1
                row[slot] = text
                size += len(text)
            rows.append(row)
            size += 16
            if size >= _REQUEST_BYTES:
                self._write_texts(rows)
                rows, size = [], 0
            self._digests[pk_of[i]] = digest  # written or about to be: a failed write takes it back
            written += 1
        if rows:
            self._write_texts(rows)
        self.lexical_fields = list(fields)
        self.texts_written = written
        if cut:
            self.texts_cut += cut
            warnings.warn(f"{cut} texts of {len(ids)} documents were longer than Milvus holds ({_MAX_TEXT:,} bytes) "
                          f"and were cut at a term: BM25 on {self._where} does not see their ends. Nothing to do "
                          f"unless those functions must be found by words near their end; then use another index "
                          f"(flat).", stacklevel=2)

    def _write_texts(self, rows: list[dict]) -> None:
        try:
            self._upsert(rows)
        except BaseException:
            for row in rows:  # their texts in Milvus are unknown now: the next set_texts writes them
                self._digests.pop(row[_PK], None)
            raise

    def _upsert(self, rows: list[dict]) -> None:
        with _milvus_errors(self._where, f"write the texts of {len(rows)} rows"):
            self._client.upsert(self.collection, rows, partial_update=True)

    def search_lexical(self, texts: Sequence[str], k: int,
                       weights: Mapping[str, float]) -> tuple[np.ndarray, list[list[str]]]:
        """The top ``k`` of each query text (terms) by the weighted sum of the BM25 scores of the fields
        set_texts gave (contracts.OPTIONAL["index"]["search_lexical"]): one ``hybrid_search`` request per
        field, each its top ``k``, summed by a ``WeightedRanker`` of the raw scores (a function outside a
        field's top k adds 0 for it). Structret fuses these with the vectors' own top k, as it does a
        lexical side of its own. Rows are best first and as long as what matched (a query with no terms:
        none)."""
        pymilvus = _pymilvus(lite=self.uri is None)
        k = min(int(k), _MAX_K, max(len(self), 1))
        unknown = [f for f in weights if f not in self.lexical_fields]
        if unknown:
            raise IndexInputError(f"search_lexical: {self._where} holds no lexical field {unknown[0]!r} (it holds "
                                  f"{', '.join(self.lexical_fields) or 'none'}); set_texts gives the fields.")
        used = [(self.lexical_fields.index(f), float(w)) for f, w in weights.items() if w > 0]
        found_scores: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
        found_ids: list[list[str]] = [[] for _ in texts]
        worded = [n for n, text in enumerate(texts) if text.strip()]
        step = 64  # queries per request
        for start in range(0, len(worded) if used and k > 0 else 0, step):
            batch = worded[start:start + step]
            requests = [pymilvus.AnnSearchRequest(data=[texts[n] for n in batch], anns_field=_slot(slot)[1],
                                                  param={"metric_type": "BM25"}, limit=k) for slot, _ in used]
            ranker = pymilvus.WeightedRanker(*(w for _, w in used), norm_score=False)
            with _milvus_errors(self._where, f"search {len(batch)} queries' terms (hybrid_search over BM25 fields)"):
                found = self._client.hybrid_search(self.collection, requests, ranker=ranker, limit=k,
                                                   output_fields=[_PK])
            for n, hits in zip(batch, found):
                row_scores = np.array([hit["distance"] for hit in hits], dtype=np.float32)
                row_pks = np.array([hit[_PK] for hit in hits], dtype=np.int64)
                keep = row_scores > 0  # a field's request may list rows that match nothing
                order = np.lexsort((row_pks[keep], -row_scores[keep]))  # equal scores by insertion order
                found_scores[n] = row_scores[keep][order]
                found_ids[n] = self._ids_of(row_pks[keep][order].tolist())
        width = max((len(row) for row in found_scores), default=0)
        scores = np.full((len(texts), width), -np.inf, dtype=np.float32)
        for row, values in zip(scores, found_scores):
            row[:len(values)] = values
        return scores, found_ids

    def _options(self) -> dict[str, Any]:
        options = {"index_type": self.index_type, "M": self.M, "ef_construction": self.ef_construction,
                   "ef": self.ef, "nlist": self.nlist, "nprobe": self.nprobe, "next_pk": self._next_pk,
                   "bm25_k1": self.bm25_k1, "bm25_b": self.bm25_b, "lexical_slots": self._slots,
                   "lexical_fields": self.lexical_fields}
        if self.uri is not None:
            options.update(uri=self.uri, db_name=self.db_name, collection=self.collection)
        return options

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
        with atomic_dir(path) as tmp:
            if self.uri is None:
                self._copy_lite_db(tmp / DB_DIR)
            else:
                with _milvus_errors(self._where, "flush the collection"):
                    self._client.flush(self.collection)
            write_ids(tmp, self._ids)
            if self._pks != list(range(len(self._pks))):
                np.save(tmp / PKS_FILE, np.asarray(self._pks, dtype=np.int64))
            if self._digests:
                digests = [self._digests.get(pk, 0) for pk in self._pks]
                np.save(tmp / TEXT_DIGESTS_FILE, np.asarray(digests, dtype=np.uint64))
            write_meta(tmp, base_meta(self.name, self.dim, self.metric, len(self), self._options(), meta))

    def _copy_lite_db(self, target: Path) -> None:
        """Copy the Lite database while its engine is stopped: stopping writes out what is still
        in memory and waits for background index builds, so the files are consistent."""
        from milvus_lite.server_manager import server_manager_instance

        db = Path(self._state["db"])
        self._client.close()
        del self._state["client"]
        server_manager_instance.release_server(str(db))
        try:
            shutil.copytree(db, target, ignore=shutil.ignore_patterns("LOCK"))
        finally:
            self._connect(None, create=False, lite_db=db)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "MilvusIndex":
        meta = read_index_meta(path, cls.name)
        dim, count = meta["dim"], meta["count"]
        options = meta.get("options") or {}
        ids = read_ids(path, count)
        if len(set(ids)) != count:
            raise ArtifactError(f"{os.path.join(path, 'ids.json')} repeats ids; the index is damaged, rebuild it.")
        index = cls.__new__(cls)  # __init__ would create a new collection
        known = ("index_type", "M", "ef_construction", "ef", "nlist", "nprobe", "uri", "db_name", "collection",
                 "bm25_k1", "bm25_b")
        settings = {key: options.get(key) for key in known}
        defaults = {"index_type": "FLAT", "M": 16, "ef_construction": 200, "ef": 100, "nlist": 128, "nprobe": 16,
                    "bm25_k1": 1.5, "bm25_b": 0.75}
        settings.update({key: value for key, value in defaults.items() if settings[key] is None})
        index._configure(dim, meta["metric"], **settings)
        _pymilvus(lite=index.uri is None)  # before copying anything
        if index.uri is None:
            saved = Path(path) / DB_DIR
            if not saved.is_dir():
                raise ArtifactError(f"{saved} is missing; the index is incomplete, rebuild it.")
            workdir = _working_copy()
            index._state["workdir"] = str(workdir)
            # a private copy: the engine writes to its directory, and the saved index must stay as saved
            shutil.copytree(saved, workdir / DB_DIR)
            try:
                index._connect(None, create=False, lite_db=workdir / DB_DIR)
            except MilvusError as exc:
                index.close()
                raise ArtifactError(f"{saved} cannot be opened by Milvus Lite ({exc}); rebuild the index.") from None
        else:
            index._connect(None, create=False)
        try:
            index._check_stored(path, count)
        except BaseException:
            index.close()
            raise
        # text_field: saved when Milvus held one BM25 field (its slot 0); neither: saved before hybrid-on-Milvus
        index._slots = int(options.get("lexical_slots") or (1 if options.get("text_field") else 0))
        index.lexical_fields = list(options.get("lexical_fields") or ([_TEXT] if index._slots else []))
        index._ids, index._id_set = ids, set(ids)
        index._pks = index._read_pks(path, count)
        index._id_of = dict(zip(index._pks, ids))
        index._digests = _read_digests(path, index._pks)
        # keys are never handed out twice, also after the highest ones were removed and the index saved
        index._next_pk = max(max(index._pks, default=-1) + 1, int(options.get("next_pk") or 0))
        return index

    @staticmethod
    def _read_pks(path: str | os.PathLike, count: int) -> list[int]:
        file = Path(path) / PKS_FILE
        if not file.is_file():  # nothing was removed before the save: the keys are the positions
            return list(range(count))
        try:
            pks = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{file} cannot be read ({exc}); the index is damaged, rebuild it.") from None
        if pks.shape != (count,) or len(np.unique(pks)) != count:
            raise ArtifactError(f"{file} holds {pks.shape} keys for {count} ids, or repeats one; the index is damaged, "
                                f"rebuild it.")
        return pks.tolist()

    def _check_stored(self, path: str | os.PathLike, count: int) -> None:
        client = self._client
        with _milvus_errors(self._where, "describe the collection"):
            exists = client.has_collection(self.collection)
            if not exists:
                raise ArtifactError(
                    f"the index at {path} points at collection {self.collection!r}, which {self._where} does not "
                    f"have (dropped, or another server or database?). Rebuild the index."
                )
            fields = client.describe_collection(self.collection)["fields"]
            stored = client.query(self.collection, filter="", output_fields=["count(*)"])[0]["count(*)"]
        stored_dim = next((f.get("params", {}).get("dim") for f in fields if f["name"] == _VECTOR), None)
        if stored_dim is None or int(stored_dim) != self.dim or stored != count:
            raise ArtifactError(
                f"{self._where} holds {stored} vectors of dimension {stored_dim}, but {path}/structret.json says "
                f"{count} vectors of dimension {self.dim}; the collection was changed after the save (or the "
                f"index is damaged). Save the index again, or rebuild it."
            )

    def __repr__(self) -> str:
        where = "lite" if self.uri is None else self.uri
        return (f"MilvusIndex(dim={self.dim}, metric={self.metric!r}, len={len(self)}, "
                f"index_type={self.index_type!r}, {where})")
