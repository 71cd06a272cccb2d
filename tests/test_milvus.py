"""The milvus index beyond the shared contract (tests/test_index_contract.py): Lite's working
copy, a server's collection and token, index types, and what happens without pymilvus."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.errors import ArtifactError, PluginError
from structret.search.saved import IndexInputError, load_index
from structret.registry import get_registry

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
except ImportError:
    HAVE_MILVUS = False
else:
    HAVE_MILVUS = True
needs_milvus = pytest.mark.skipif(not HAVE_MILVUS,
                                  reason="pymilvus/milvus-lite not installed: pip install 'structret[milvus]'")


def vectors(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def ids_for(n: int, start: int = 0) -> list[str]:
    return [f"doc{i}" for i in range(start, start + n)]


@pytest.fixture
def indexes():
    made = []

    def create(*args, **options):
        index = get_registry().create("index", "milvus", *args, **options)
        made.append(index)
        return index

    yield create
    for index in made:
        index.close()


@pytest.fixture(scope="module")
def server():
    """A Milvus server for the uri= path: the one STRUCTRET_MILVUS_URI names (Standalone or Distributed,
    docs/scale.md; its token in STRUCTRET_MILVUS_TOKEN), else Milvus Lite's own gRPC server, spoken to as
    any server."""
    if os.environ.get("STRUCTRET_MILVUS_URI"):
        yield os.environ["STRUCTRET_MILVUS_URI"]
        return
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    with tempfile.TemporaryDirectory() as data:
        grpc_server, db, port = start_server_in_thread(data_dir=os.path.join(data, "server"), host="127.0.0.1", port=0)
        yield f"http://127.0.0.1:{port}"
        grpc_server.stop(grace=0)
        db.close()


def test_importing_the_plugin_loads_no_milvus():
    code = ("import sys, structret_indexes.plugin, structret_indexes.milvus; "
            "print(sorted(m for m in ('pymilvus', 'milvus_lite', 'grpc') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("missing,says", [
    ("pymilvus", "pip install 'structret[milvus]'"),
    ("milvus_lite", "milvus-lite package. Install it with: pip install 'structret[milvus]' (or pass uri="),
])
def test_without_the_packages_create_says_what_to_install(monkeypatch, missing, says):
    monkeypatch.setitem(sys.modules, missing, None)  # import now raises ImportError
    if missing == "milvus_lite" and not HAVE_MILVUS:
        pytest.skip("needs pymilvus installed to reach the milvus-lite check")
    with pytest.raises(PluginError, match=f"^index 'milvus'.*{re.escape(says)}"):
        get_registry().create("index", "milvus", 8)


@needs_milvus
def test_lite_keeps_its_database_in_the_saved_directory_and_works_on_a_copy(tmp_path, indexes):
    index = indexes(16)
    index.add(ids_for(50), vectors(50))
    workdir = index._state["workdir"]
    index.save(tmp_path / "idx")
    saved = tmp_path / "idx" / "milvus.db"
    assert saved.is_dir() and any(p.suffix == ".parquet" for p in saved.rglob("*"))
    assert not (saved / "LOCK").exists()
    sums = json.loads((tmp_path / "idx" / "checksums.json").read_text())
    assert any(name.startswith("milvus.db/") for name in sums)

    loaded = load_index(tmp_path / "idx")
    assert loaded._state["workdir"] != workdir and not loaded._state["db"].startswith(str(tmp_path))
    loaded_workdir = loaded._state["workdir"]
    loaded.close()
    index.close()
    assert not os.path.exists(workdir) and not os.path.exists(loaded_workdir)
    with pytest.raises(Exception, match="closed; load it again"):
        index.search(vectors(1), 1)


@needs_milvus
@pytest.mark.parametrize("options", [
    {"index_type": "IVF_FLAT", "nlist": 4, "nprobe": 4},  # every list probed: exhaustive
    {"index_type": "hnsw", "ef": 5},  # ef is raised to k
])
def test_index_type_options_reach_milvus(tmp_path, indexes, options):
    stored, queries = vectors(300), vectors(5, seed=1)
    index = indexes(16, **options)
    assert not index.exact and index.index_type == options["index_type"].upper()
    built = index._client.describe_index(index.collection, "vector")
    assert built["index_type"] == index.index_type and built["metric_type"] == "IP"
    want = {"nlist": 4} if "nlist" in options else {"M": 16, "efConstruction": 200}  # reached the engine
    assert want.items() <= built["params"].items()
    index.add(ids_for(300), stored)
    index.save(tmp_path / "idx")  # seals the vectors: from now on the index type searches them
    scores, ids = index.search(queries, 50)
    want = np.argsort(-(queries @ stored.T), axis=1, kind="stable")[:, :50]
    assert scores.shape == (5, 50)
    assert np.mean([len(set(g) & {f"doc{r}" for r in w}) / 50 for g, w in zip(ids, want)]) >= 0.95
    saved = json.loads((tmp_path / "idx" / "structret.json").read_text())["options"]
    assert {key: saved[key] for key in options} == {**options, "index_type": options["index_type"].upper()}


@needs_milvus
def test_bad_options_are_refused_before_anything_is_created(indexes):
    with pytest.raises(IndexInputError, match="Milvus Lite has no index_type 'DISKANN'"):
        indexes(8, index_type="DISKANN")
    with pytest.raises(IndexInputError, match="give uri= too"):
        indexes(8, collection="mine")
    with pytest.raises(IndexInputError, match="carries credentials.*STRUCTRET_MILVUS_TOKEN"):
        indexes(8, uri="http://root:Milvus@localhost:19530")
    with pytest.raises(IndexInputError, match="not a Milvus server address"):
        indexes(8, uri="./local.db")
    with pytest.raises(PluginError, match="Did you mean 'nprobe'"):
        indexes(8, nprobes=4)


@needs_milvus
def test_a_server_index_saves_where_it_is_never_the_token(tmp_path, indexes, server, monkeypatch):
    import pymilvus

    tokens = []
    real_client = pymilvus.MilvusClient

    def client(*args, **kwargs):
        tokens.append(kwargs.get("token"))
        return real_client(*args, **kwargs)

    monkeypatch.setattr(pymilvus, "MilvusClient", client)
    monkeypatch.delenv("STRUCTRET_MILVUS_TOKEN", raising=False)
    index = indexes(16, uri=server, token="s3cret-option", collection="contract_docs")
    stored = vectors(40)
    index.add(ids_for(40), stored)
    index.save(tmp_path / "idx")
    written = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "idx").iterdir())
    assert "s3cret" not in written and not (tmp_path / "idx" / "milvus.db").exists()
    options = json.loads((tmp_path / "idx" / "structret.json").read_text())["options"]
    assert options["uri"] == server and options["collection"] == "contract_docs"

    monkeypatch.setenv("STRUCTRET_MILVUS_TOKEN", "s3cret-env")
    loaded = load_index(tmp_path / "idx")
    assert tokens == ["s3cret-option", "s3cret-env"]
    assert loaded.search(stored[:3], 2)[1] == index.search(stored[:3], 2)[1]

    with pytest.raises(IndexInputError, match="'contract_docs' already exists"):
        indexes(16, uri=server, collection="contract_docs")

    loaded.add(["late"], vectors(1, seed=2))  # the collection moves on; the saved ids do not
    with pytest.raises(ArtifactError, match="holds 41 vectors.*says 40 vectors.*changed after the save"):
        load_index(tmp_path / "idx")
    loaded.save(tmp_path / "idx")
    assert len(load_index(tmp_path / "idx")) == 41

    real_client(uri=server).drop_collection("contract_docs")
    with pytest.raises(ArtifactError, match="collection 'contract_docs'.*does not have"):
        load_index(tmp_path / "idx")


@needs_milvus
def test_the_cli_builds_and_searches_a_milvus_index(tmp_path, tiny_bert_dir, fresh_registry):
    from click.testing import CliRunner

    from structret.cli import cli

    src = tmp_path / "src"
    src.mkdir()
    docs = {"config": "Read the configuration file and return its settings.", "dates": "Parse an ISO date string.",
            "mail": "Send an email message through the server."}
    for name, doc in docs.items():
        (src / f"{name}.py").write_text(f'def {name}(x):\n    """{doc}"""\n    y = x + 1\n    z = y * 2\n    return z\n')
    corpus = tmp_path / "corpus.jsonl.gz"
    for args in (["mine", src, "--language", "python", "--out", corpus],
                 ["encode", "--data", f"codesearchnet:{corpus}", "--backbone", "hf-encoder",
                  "--model", tiny_bert_dir, "--out", tmp_path / "emb"],
                 ["index", "--embeddings", tmp_path / "emb", "--index", "milvus", "--index-option", "index_type=HNSW",
                  "--index-option", "M=8", "--out", tmp_path / "idx"],
                 ["search", tmp_path / "idx", "read a config file", "-k", "3"]):
        result = CliRunner().invoke(cli, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "idx" / "structret.json").read_text())
    assert saved["index"] == "milvus" and saved["count"] == len(docs), saved
    assert re.findall(r"^ +(\d+)\. -?\d", result.output, re.M) == ["1", "2", "3"]


@needs_milvus
def test_an_unreachable_server_is_a_clear_error(indexes):
    with pytest.raises(Exception, match=r"Milvus at http://127.0.0.1:1 .*failed to connect \(is the server running"):
        indexes(8, uri="http://127.0.0.1:1")


@needs_milvus
def test_an_add_that_fails_half_way_leaves_nothing_behind(indexes, monkeypatch):
    import structret_indexes.milvus as milvus
    from pymilvus.exceptions import MilvusException

    monkeypatch.setattr(milvus, "_REQUEST_BYTES", 4 * 16 * 10)  # ten vectors per insert request
    index = indexes(16)
    stored = vectors(80)
    index.add(ids_for(20), stored[:20])
    client, calls = index._client, []
    real_insert = client.insert

    def insert(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise MilvusException(message="connection reset")
        return real_insert(*args, **kwargs)

    monkeypatch.setattr(client, "insert", insert)
    with pytest.raises(milvus.MilvusError, match="failed to insert 10 vectors: .*connection reset"):
        index.add(ids_for(60, 20), stored[20:])
    assert len(index) == 20
    # the twenty that did arrive are gone (a server would keep both copies of a re-added key)
    assert client.query(index.collection, filter="", output_fields=["count(*)"])[0]["count(*)"] == 20
    monkeypatch.setattr(client, "insert", real_insert)
    index.add(ids_for(60, 20), stored[20:])
    assert client.query(index.collection, filter="", output_fields=["count(*)"])[0]["count(*)"] == 80
    queries = vectors(10, seed=3)
    _, ids = index.search(queries, 5)
    assert ids == [[f"doc{r}" for r in row] for row in np.argsort(-(queries @ stored.T), axis=1)[:, :5]]


@needs_milvus
def test_removed_ids_stay_gone_through_save_and_load_and_may_come_back(tmp_path, indexes):
    import structret_indexes.milvus as milvus

    index = indexes(16)
    stored = vectors(30)
    index.add(ids_for(30), stored)
    index.remove(["doc3", "doc7"])
    _, found = index.search(stored[[3, 7, 8]], 1)
    assert found[0][0] != "doc3" and found[1][0] != "doc7" and found[2] == ["doc8"] and len(index) == 28
    index.add(["doc3"], stored[3:4] * -1)  # back, with another vector, under a new key
    index.save(tmp_path / "idx")
    assert (tmp_path / "idx" / milvus.PKS_FILE).is_file()
    loaded = load_index(tmp_path / "idx")
    try:
        assert len(loaded) == 29 and loaded.ids[-1] == "doc3"
        _, found = loaded.search(-stored[3:4], 1)
        assert found == [["doc3"]]
        loaded.remove(["doc0"])
        assert "doc0" not in loaded.search(stored[:1], 29)[1][0]
    finally:
        loaded.close()
    index.remove(["doc3", "doc29"])  # the two highest keys: never handed out again, across a save too
    index.save(tmp_path / "again")
    again = load_index(tmp_path / "again")
    try:
        again.add(["new"], stored[:1])
        assert again._pks[-1] == 31 and again.search(stored[:1], 1)[1][0][0] in ("doc0", "new")
    finally:
        again.close()
    np.save(tmp_path / "idx" / milvus.PKS_FILE, np.zeros(29, dtype=np.int64))
    with pytest.raises(ArtifactError, match="repeats one; the index is damaged"):
        milvus.MilvusIndex._read_pks(tmp_path / "idx", 29)


@needs_milvus
def test_a_remove_that_fails_half_way_keeps_what_milvus_deleted_out(indexes, monkeypatch):
    import structret_indexes.milvus as milvus
    from pymilvus.exceptions import MilvusException

    monkeypatch.setattr(milvus, "_DELETE_KEYS", 5)
    index = indexes(16)
    stored = vectors(20)
    index.add(ids_for(20), stored)
    client, calls = index._client, []
    real_delete = client.delete

    def delete(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise MilvusException(message="connection reset")
        return real_delete(*args, **kwargs)

    monkeypatch.setattr(client, "delete", delete)
    with pytest.raises(milvus.MilvusError, match="failed to delete 5 vectors"):
        index.remove(ids_for(10))
    # the first five were deleted and are gone here too; the next five are still searchable
    assert len(index) == 15 and index.ids[:5] == ids_for(5, 5)
    _, found = index.search(stored[:10], 1)
    assert [row[0] for row in found[5:]] == ids_for(5, 5) and not set(ids_for(5)) & {row[0] for row in found}


@needs_milvus
def test_a_source_index_on_milvus_is_updated_in_place(tmp_path, tiny_bert_dir, fresh_registry, monkeypatch):
    from click.testing import CliRunner

    from structret.cli import cli

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    for name in ("config", "dates", "mail"):
        (src / f"{name}.py").write_text(f"def {name}(x):\n    return x + 1\n")

    def index():
        result = CliRunner().invoke(cli, [str(a) for a in ["index", src, "--index", "milvus", "--backbone", "hf-encoder",
                                                           "--model", tiny_bert_dir, "--out", tmp_path / "idx"]])
        assert result.exit_code == 0, result.output
        return result.output

    index()
    (src / "mail.py").write_text("def send_mail(x):\n    return x + 2\n")
    out = index()
    assert "1 of 3 files cut" in out and "indexed 3 units" in out  # removed and added, not rebuilt
    result = CliRunner().invoke(cli, ["search", str(tmp_path / "idx"), "send mail", "-k", "3", "--json"])
    assert result.exit_code == 0 and "send_mail" in result.output and "def mail(" not in result.output


@needs_milvus
def test_remove_on_a_server_collection_survives_save_and_load(tmp_path, indexes, server):
    import pymilvus

    name = f"remove_{os.getpid()}"
    index = indexes(16, uri=server, collection=name)
    stored = vectors(12)
    try:
        index.add(ids_for(12), stored)
        index.remove(["doc2", "doc5"])
        index.save(tmp_path / "idx")
        loaded = load_index(tmp_path / "idx")
        try:
            _, found = loaded.search(stored[[2, 5, 6]], 1)
            assert len(loaded) == 10 and found[2] == ["doc6"] and {found[0][0], found[1][0]}.isdisjoint({"doc2", "doc5"})
        finally:
            loaded.close()
    finally:
        pymilvus.MilvusClient(uri=server, token=os.environ.get("STRUCTRET_MILVUS_TOKEN", "")).drop_collection(name)


@needs_milvus
def test_a_killed_process_working_copy_is_swept_by_the_next_one(tmp_path, indexes, monkeypatch):
    import structret_indexes.milvus as milvus

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"{milvus.WORKDIR_PREFIX}{int(dead.stdout)}-abc123"  # a process that exited without cleaning
    (left / milvus.DB_DIR).mkdir(parents=True)
    mine = tmp_path / f"{milvus.WORKDIR_PREFIX}{os.getpid()}-live"  # this process's: in use
    mine.mkdir()
    index = indexes(8)
    assert not left.exists() and mine.exists()
    assert Path(index._state["workdir"]).name.startswith(f"{milvus.WORKDIR_PREFIX}{os.getpid()}-")


# --- a hybrid's lexical side held by Milvus (set_texts, search_lexical: contracts.OPTIONAL["index"]) ---------

_CODE = {"config": "def readConfigFile(path):\n    return parse_settings(open(path).read())",
         "dates": "def parse_iso_date(text):\n    return datetime.fromisoformat(text)",
         "mail": "def sendEmailMessage(server, message):\n    server.deliver(message)",
         "sum": "def total(values):\n    return sum(values)"}


def _hybrid(kind, fusion, seed=0, lexical="bm25"):
    from structret.search.build import build_index

    return build_index(None, vectors(len(_CODE), seed=seed), ids=list(_CODE), texts=list(_CODE.values()), kind=kind,
                       lexical=lexical, fusion=fusion, show_progress=False)


@needs_milvus
def test_milvus_holds_the_lexical_side_and_reads_identifier_parts(tmp_path, fresh_registry):
    from structret.search.index import load_index as load_search_index
    from structret.search.lexical import IndexHeldSide
    from structret.search.texts import TextStore

    index = _hybrid("milvus", "zscore:1")  # the lexical side alone decides
    assert isinstance(index.lexical, IndexHeldSide) and index.lexical.retriever._model is None  # no BM25 fitted
    queries = ["read the config file", "send an email message", "iso date"]
    # Milvus's standard analyzer alone keeps readConfigFile whole: the parts come from structret's terms
    found = index.search_vectors(vectors(3, seed=9), 1, texts=queries)
    assert [hits[0].id for hits in found] == ["config", "mail", "dates"]
    index.save(tmp_path / "idx")
    index.index.close()
    loaded = load_search_index(tmp_path / "idx")
    assert isinstance(loaded.lexical, IndexHeldSide) and isinstance(loaded.texts, TextStore)
    assert not (tmp_path / "idx" / "lexical" / "bm25.json").exists()  # nothing of structret's BM25 saved
    again = loaded.search_vectors(vectors(3, seed=9), 1, texts=queries)
    assert [hits[0].id for hits in again] == ["config", "mail", "dates"]
    assert again[0][0].text == _CODE["config"]
    loaded.index.close()


@needs_milvus
def test_milvus_hybrid_follows_the_dense_side_alone_exactly_and_answers_every_query(fresh_registry):
    flat, milvus = _hybrid("flat", "zscore:0"), _hybrid("milvus", "zscore:0")
    queries = vectors(5, seed=3)
    texts = ["config", "", "the", "send mail", "values total"]  # "" and a stopword: no terms, searched by vector
    want = flat.search_vectors(queries, 3, texts=texts)
    got = milvus.search_vectors(queries, 3, texts=texts)
    assert [[h.id for h in row] for row in got] == [[h.id for h in row] for row in want]
    assert all(len(row) == 3 for row in got)
    milvus.index.close()


@needs_milvus
def test_an_update_of_a_milvus_hybrid_index_removes_and_adds_texts(tmp_path, fresh_registry, monkeypatch):
    import structret_indexes.milvus as milvus
    from structret.api import update_index
    from structret.search.index import load_index as load_search_index

    index = _hybrid("milvus", "zscore:1", lexical="bm25-fields")
    index.save(tmp_path / "idx")
    index.index.close()
    written: list[dict] = []
    monkeypatch.setattr(milvus.MilvusIndex, "_upsert", lambda self, rows: written.extend(rows))
    update_index(tmp_path / "idx", remove=["mail"], show_progress=False)
    assert written == []  # the other functions' texts are what Milvus holds: none is written again
    monkeypatch.undo()
    loaded = load_search_index(tmp_path / "idx")
    hits = loaded.search_vectors(vectors(1, seed=9), 4, texts=["send an email message"])[0]
    assert "mail" not in [h.id for h in hits] and len(hits) == 3
    loaded.index.close()


@needs_milvus
def test_set_texts_writes_only_the_rows_whose_texts_changed_also_after_save_and_load(tmp_path, indexes, monkeypatch):
    # an update gives every row's fields again (a function's callers move with others): writing them all made a
    # Milvus hybrid's update O(project)
    import structret_indexes.milvus as milvus

    written: list[int] = []
    upsert = milvus.MilvusIndex._upsert
    monkeypatch.setattr(milvus.MilvusIndex, "_upsert", lambda self, rows: (written.extend(r["pk"] for r in rows),
                                                                          upsert(self, rows))[1])
    index = indexes(4)
    index.add(["a", "b", "c"], np.eye(3, 4, dtype=np.float32))
    fields = {"name": ["alpha", "beta", "gamma"], "body": ["one", "two", "three"]}
    index.set_texts(["a", "b", "c"], fields)
    assert index.texts_written == 3 and len(written) == 3
    index.set_texts(["a", "b", "c"], fields)
    assert index.texts_written == 0 and len(written) == 3
    index.set_texts(["a", "b", "c"], {"name": ["alpha", "delta", "gamma"], "body": ["one", "two", "three"]})
    assert index.texts_written == 1 and written[-1] == index._pks[1]
    assert index.search_lexical(["delta"], 1, {"name": 1.0, "body": 1.0})[1] == [["b"]]
    assert index.search_lexical(["beta"], 3, {"name": 1.0, "body": 1.0})[1] == [[]]  # the old text is gone
    index.remove(["c"])
    index.add(["c"], np.ones((1, 4), dtype=np.float32))  # back under a new key, its texts empty in Milvus
    changed = {"name": ["alpha", "delta", "gamma"], "body": ["one", "two", "three"]}
    index.set_texts(["a", "b", "c"], changed)
    assert index.texts_written == 1 and written[-1] == index._pks[-1]
    index.save(tmp_path / "idx")
    loaded = load_index(tmp_path / "idx")
    try:
        loaded.set_texts(["a", "b", "c"], changed)
        assert loaded.texts_written == 0  # the digests were saved with the collection
        loaded.set_texts(["a", "b", "c"], {"body": changed["body"], "name": changed["name"]})
        assert loaded.texts_written == 3  # the fields moved to other slots: every row again
        assert loaded.search_lexical(["gamma"], 1, {"name": 1.0, "body": 1.0})[1] == [["c"]]
    finally:
        loaded.close()
    (tmp_path / "idx" / milvus.TEXT_DIGESTS_FILE).write_bytes(b"damaged")
    assert milvus._read_digests(tmp_path / "idx", [0, 1, 2]) == {}  # not known: every row is written again


@needs_milvus
def test_a_write_of_texts_that_fails_forgets_what_it_did_not_write(indexes, monkeypatch):
    import structret_indexes.milvus as milvus

    index = indexes(4)
    index.add(["a", "b"], np.eye(2, 4, dtype=np.float32))

    def fail(self, rows):
        raise milvus.MilvusError("the server went away")

    monkeypatch.setattr(milvus.MilvusIndex, "_upsert", fail)
    with pytest.raises(milvus.MilvusError):
        index.set_texts(["a", "b"], {"text": ["alpha", "beta"]})
    monkeypatch.undo()
    index.set_texts(["a", "b"], {"text": ["alpha", "beta"]})
    assert index.texts_written == 2
    assert index.search_lexical(["beta"], 1, {"text": 1.0})[1] == [["b"]]


@needs_milvus
def test_a_milvus_collection_from_before_hybrid_says_to_rebuild(indexes):
    from structret_indexes.milvus import MilvusError

    index = indexes(4)
    index.add(["a"], np.ones((1, 4), dtype=np.float32))
    index._slots = 0  # as a collection made before hybrid-on-Milvus loads
    with pytest.raises(MilvusError, match="earlier structret.*rebuild the index"):
        index.set_texts(["a"], {"text": ["alpha"]})
    index._slots = 1  # as one made when Milvus held one BM25 field: plain bm25 fits, fields do not
    index.set_texts(["a"], {"text": ["alpha"]})
    with pytest.raises(IndexInputError, match="holds at most 1 .*rebuild it to hold more"):
        index.set_texts(["a"], {"name": ["alpha"], "body": ["alpha"]})
    with pytest.raises(IndexInputError, match="not in the index"):
        indexes(4).set_texts(["nope"], {"text": ["x"]})


@needs_milvus
def test_the_cli_builds_a_hybrid_milvus_index_from_data_searches_and_removes(tmp_path, tiny_bert_dir, fresh_registry):
    from click.testing import CliRunner

    from structret.cli import cli

    src = tmp_path / "src"
    src.mkdir()
    for name, doc in {"readConfigFile": "Read the configuration file.", "parseIsoDate": "Parse an ISO date string.",
                      "sendEmailMessage": "Send an email message."}.items():
        (src / f"{name}.py").write_text(f'def {name}(x):\n    """{doc}"""\n    y = x + 1\n    return y * 2\n')
    corpus = tmp_path / "corpus.jsonl.gz"

    def run(*args):
        result = CliRunner().invoke(cli, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        return result.stdout

    run("mine", src, "--language", "python", "--out", corpus)
    run("index", "--data", f"codesearchnet:{corpus}", "--backbone", "hf-encoder", "--model",
        tiny_bert_dir, "--index", "milvus", "--lexical", "bm25", "--fusion", "zscore:1", "--out", tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "structret.json").read_text())
    assert meta["lexical"]["in_index"] is True and meta["index"] == "milvus"
    hits = json.loads(run("search", tmp_path / "idx", "send email", "-k", "3", "--json"))
    top = hits[0]["hits"][0]
    assert "sendEmailMessage" in json.dumps(top)  # the parts of the name, found by Milvus's BM25
    run("index", "--out", tmp_path / "idx", "--remove", top["id"])
    after = run("search", tmp_path / "idx", "send email", "-k", "3", "--json")
    assert top["id"] not in after


@needs_milvus
def test_a_text_longer_than_milvus_holds_is_cut_at_a_term_with_a_warning(indexes):
    index = indexes(4)
    index.add(["long", "short"], np.eye(2, 4, dtype=np.float32))
    with pytest.warns(UserWarning, match="1 texts of 2 documents were longer than Milvus holds"):
        index.set_texts(["long", "short"], {"text": ["alpha " * 12000 + "omega", "beta"]})
    assert index.texts_cut == 1
    _, found = index.search_lexical(["alpha"], 1, {"text": 1.0})
    assert found == [["long"]]  # what was kept is searched


@needs_milvus
def test_milvus_weighs_each_field_as_bm25_fields_does_and_fuses_as_structret_does(fresh_registry):
    # each field a BM25 of its own in Milvus, summed with the retriever's weights: the lexical side alone ranks
    # as structret's bm25-fields, and the fusion is structret's (sources included)
    flat, milvus = _hybrid("flat", "zscore:0.5", lexical="bm25-fields"), _hybrid("milvus", "zscore:0.5",
                                                                                   lexical="bm25-fields")
    assert milvus.index.lexical_fields == ["name", "signature", "comments", "body"]
    assert milvus.meta["lexical"]["field_weights"] == {"name": 1.0, "signature": 0.5, "comments": 0.25, "body": 1.0}
    texts = ["read the config file", "send an email message", "parse a date", "total of values"]
    queries = vectors(len(texts), seed=5)
    want = flat.search_vectors(queries, 4, texts=texts)
    got = milvus.search_vectors(queries, 4, texts=texts)
    assert [[h.id for h in row] for row in got] == [[h.id for h in row] for row in want]
    assert all(h.sources for row in got for h in row)
    lexical_terms = [" ".join(t) for t in milvus.lexical.retriever.terms(texts, "query")]
    scores, ids = milvus.index.search_lexical(lexical_terms, 4, milvus.meta["lexical"]["field_weights"])
    flat_scores = flat.lexical.retriever.score(texts)
    for row_scores, row_ids, expected in zip(scores, ids, flat_scores):
        by_id = dict(zip(flat.lexical_ids, expected))
        # Milvus's BM25 is Lucene's over the same terms, its term weight times (k1 + 1), which bm25s' lucene leaves
        # out: the same ranking, and a per-query normalization takes the factor out of the fusion
        np.testing.assert_allclose(row_scores[:len(row_ids)] / (milvus.index.bm25_k1 + 1), [by_id[i] for i in row_ids],
                                   rtol=1e-4)
    milvus.index.close()
