"""A lexical side updated instead of fitted again: reading only the new documents, it scores exactly
as a fit of the whole new corpus (BM25's document frequencies and mean length move with every document)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from structret_lexical.bm25 import BM25Retriever
from structret_lexical.fields import ProjectFieldBM25Retriever, code_reading
from structret_lexical.term_counts import FILE

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)

DOCS = [
    "def read_config(path): return parse_lines(open(path).read())",
    "def parse_lines(text): return [line.split('=') for line in text.splitlines()]",
    "def write_config(path, values): open(path, 'w').write(format_values(values))",
    "def format_values(values): return '\\n'.join(f'{k}={v}' for k, v in values.items())",
    "def connect_socket(host, port): return socket.create_connection((host, port))",
    "def send_message(sock, message): sock.sendall(message.encode())",
]
QUERIES = ["read the config file", "parse lines of text", "send a message over a socket", "format values", "zzz"]


def scores(retriever, queries=QUERIES):
    return retriever.score(queries)


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_an_updated_bm25_scores_exactly_as_a_fit_of_the_new_corpus(method, tmp_path):
    fitted = BM25Retriever(method=method)
    fitted.fit(DOCS)
    fitted.save(tmp_path / "bm25")
    loaded = BM25Retriever.load(tmp_path / "bm25")  # the counts are read from disk by the update
    new = ["def read_settings(path): return read_config(path)", "def close_socket(sock): sock.close()"]
    rows = [0, 2, new[0], 3, 5, new[1]]  # 1 and 4 removed, two added
    assert loaded.update(rows)
    fresh = BM25Retriever(method=method)
    fresh.fit([DOCS[0], DOCS[2], new[0], DOCS[3], DOCS[5], new[1]])
    assert np.array_equal(scores(loaded), scores(fresh))  # not close: the same floats
    assert len(loaded) == 6
    # and again, from what the first update kept, through a save and load
    loaded.save(tmp_path / "again")
    again = BM25Retriever.load(tmp_path / "again")
    assert again.update([5, 4, "def open_socket(host): return socket.socket()"])
    fresh.fit([new[1], DOCS[5], "def open_socket(host): return socket.socket()"])
    assert np.array_equal(scores(again), scores(fresh))


def test_a_bm25_saved_without_its_counts_is_not_updated_and_says_so(tmp_path):
    fitted = BM25Retriever()
    fitted.fit(DOCS)
    fitted.save(tmp_path / "bm25")
    (tmp_path / "bm25" / FILE).unlink()  # as an older structret saved it
    loaded = BM25Retriever.load(tmp_path / "bm25")
    before = scores(loaded)
    assert loaded.update([0, 1, "def f(): pass"]) is False
    assert np.array_equal(scores(loaded), before) and len(loaded) == len(DOCS)
    with pytest.raises(ValueError, match=r"positions in 0..5 or texts"):
        fitted.update([0, 9])


def _project(names_and_code):
    return [code_reading(code, path=path, func_name=name) for path, name, code in names_and_code]


PROJECT = [
    ("pkg/config.py", "read_config", "def read_config(path):\n    return parse_lines(open(path).read())"),
    ("pkg/config.py", "parse_lines", "def parse_lines(text):\n    return text.splitlines()"),
    ("pkg/net.py", "Client.send", "def send(self, message):\n    self.sock.sendall(message)"),
    ("pkg/net.py", "Client.close", "def close(self):\n    self.sock.close()"),
]


def test_an_updated_project_bm25_reads_the_call_graph_again_and_scores_as_a_fit(tmp_path):
    fitted = ProjectFieldBM25Retriever()
    fitted.fit(_project(PROJECT))
    fitted.save(tmp_path / "fields")
    loaded = ProjectFieldBM25Retriever.load(tmp_path / "fields")
    # a new function calling close: close's callers field changes although close itself did not
    added = _project([("pkg/net.py", "Client.shutdown", "def shutdown(self):\n    self.close()\n    flush_buffers()")])
    assert loaded.update([0, 1, 3, added[0]])  # send removed
    fresh = ProjectFieldBM25Retriever()
    fresh.fit(_project([PROJECT[0], PROJECT[1], PROJECT[3]]) + added)
    queries = QUERIES + ["shutdown", "close the connection", "config"]
    assert np.array_equal(loaded.score(queries), fresh.score(queries))
    assert loaded.field_scores(["shutdown"])["callers"][0][2] > 0  # close is called by shutdown now
    loaded.save(tmp_path / "saved")
    graph = json.loads((tmp_path / "saved" / "graph.json").read_text())
    assert graph[2][0] == "close" and graph[2][4] == "shutdown"
    again = ProjectFieldBM25Retriever.load(tmp_path / "saved")
    assert again.update([3, 0, 1])  # shutdown gone: close has no caller again
    fresh.fit([added[0]] + _project([PROJECT[0], PROJECT[1]]))
    assert np.array_equal(again.score(queries), fresh.score(queries))


def test_a_field_without_words_gets_them_from_an_update_as_a_fit_would():
    fitted = ProjectFieldBM25Retriever()
    fitted.fit(["def first(x):\n    return x"])  # no function calls another: the callers field has no words
    assert fitted._fields["callers"] is None
    assert fitted.update([0, "def second(y):\n    return first(y)"])
    fresh = ProjectFieldBM25Retriever()
    fresh.fit(["def first(x):\n    return x", "def second(y):\n    return first(y)"])
    assert fitted._fields["callers"] is not None
    assert np.array_equal(fitted.score(["second"]), fresh.score(["second"]))
    assert fitted.update([1])  # second alone: nobody calls it, the field is empty again
    assert fitted._fields["callers"] is None and len(fitted) == 1


def _lexical_scores(index_dir, queries):
    from structret.search.index import load_index

    found = load_index(index_dir, texts=True)
    rows = found.lexical.retriever.score(queries)
    return {doc: tuple(rows[:, n]) for n, doc in enumerate(found.lexical_ids)}


def test_a_source_index_rerun_updates_its_lexical_side_and_scores_as_a_rebuild(tmp_path, tiny_bert_dir, monkeypatch,
                                                                               fresh_registry):
    from click.testing import CliRunner

    from structret.artifacts import write_checksums
    from structret.cli import cli
    from structret_lexical.fields import FieldBM25Retriever

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "config.py").write_text(
        "def read_config(path):\n    return parse_lines(open(path).read())\n\n\n"
        "def parse_lines(text):\n    return text.splitlines()\n")
    (project / "pkg" / "net.py").write_text(
        "class Client:\n    def send(self, message):\n        self.sock.sendall(message)\n\n"
        "    def close(self):\n        self.sock.close()\n")

    def index(out):
        args = ["index", project, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", out]
        result = CliRunner().invoke(cli, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        return result.output

    fits = []
    real_fit = FieldBM25Retriever.fit
    monkeypatch.setattr(FieldBM25Retriever, "fit", lambda self, docs: fits.append(len(docs)) or real_fit(self, docs))
    index(tmp_path / "idx")
    assert fits == [5]  # read_config, parse_lines; Client's header, send, close
    # an edit: a new function calling read_config from another file, parse_lines gone
    (project / "pkg" / "net.py").write_text((project / "pkg" / "net.py").read_text().replace(
        "self.sock.close()", "self.sock.close()\n\n    def reload(self):\n        return read_config(self.path)"))
    (project / "pkg" / "config.py").write_text("def read_config(path):\n    return open(path).read()\n")
    assert "indexed 5 units" in index(tmp_path / "idx")
    assert fits == [5]  # updated, not fitted
    queries = ["read the config", "reload", "parse lines", "close the socket"]
    updated = _lexical_scores(tmp_path / "idx", queries)
    index(tmp_path / "rebuilt")
    assert updated == _lexical_scores(tmp_path / "rebuilt", queries)

    # an index saved before its lexical side kept its counts: fitted once, then updated
    for saved in (tmp_path / "idx" / "lexical").rglob("*"):
        if saved.name in ("term_counts.npz", "graph.json"):
            saved.unlink()
    write_checksums(tmp_path / "idx")
    (project / "pkg" / "config.py").write_text("def read_config(path):\n    return open(path).read().strip()\n")
    index(tmp_path / "idx")
    assert fits == [5, 5, 5] and list((tmp_path / "idx" / "lexical").rglob("term_counts.npz"))
