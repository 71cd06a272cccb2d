"""structret serve: the search page, the JSON API, bad requests, the model loaded once, a real server."""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from _tiny_models import one_torch_thread, tiny_bert_dir, tiny_t5_dir  # noqa: F401  (fixtures)

import structret
from structret.errors import PluginError
from structret.registry import get_registry
from structret.serving.entities import choose_marker, looks_like_python
from structret.serving.server import bind_lines

ROOT = Path(__file__).resolve().parents[1]

from _tiny_models import FUNCTIONS  # noqa: E402  (test_browser and test_export import it from here)


def write_functions(path: Path, partition: str = "test") -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, (name, arg, doc, body) in enumerate(FUNCTIONS):
            code = f'def {name}({arg}):\n    """{doc}"""\n    {body}\n'
            f.write(json.dumps({"repo": "me/project", "path": f"m{i}.py", "func_name": name, "language": "python",
                                "code": code, "docstring": doc, "docstring_tokens": doc.split(),
                                "partition": partition, "url": f"https://example.org/{name}"}) + "\n")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_bert_dir):  # noqa: F811
    """An index of FUNCTIONS saved by the tiny BERT, and an app over it; every weights load counted."""
    from starlette.testclient import TestClient
    from structret_backbones import _loading

    from structret.serving import create_app

    tmp = tmp_path_factory.mktemp("serve")
    data = write_functions(tmp / "functions.jsonl.gz")
    index = structret.build_index(structret.load_model(str(tiny_bert_dir)), f"codesearchnet:{data}",
                                  show_progress=False)
    index.save(tmp / "idx")
    loads = []
    real = _loading.from_pretrained
    with pytest.MonkeyPatch.context() as patch:
        def counting(loader, source, is_local, what, **kwargs):
            if what == "weights":
                loads.append(source)
            return real(loader, source, is_local, what, **kwargs)

        patch.setattr(_loading, "from_pretrained", counting)
        app = create_app(tmp / "idx")
        loads_to_create = len(loads)
        client = TestClient(app, raise_server_exceptions=False)
        by_name = {next(n for n, *_ in FUNCTIONS if f"def {n}(" in t): (i, t) for i, t in index.texts.items()}
        yield SimpleNamespace(dir=tmp / "idx", app=app, client=client, loads=loads, by_name=by_name,
                              loads_to_create=loads_to_create,
                              searcher=app.state.searcher)


def _hit_blocks(html: str) -> list[str]:
    return re.findall(r'<li class="hit" id="hit-\d+">(.*?)</li>', html, re.S)


# --- the page ----------------------------------------------------------------------------


def test_the_page_shows_the_query_ranked_hits_highlighted_code_and_entities(served):
    own_id, code = served.by_name["read_config"]
    response = served.client.get("/", params={"q": code, "k": "3"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    assert f'value="{code[:20]}' in unescape(html)  # the form keeps the query
    assert unescape(re.search(r'<q class="query">(.*?)</q>', html, re.S).group(1)) == code
    blocks = _hit_blocks(html)
    assert len(blocks) == 3
    ranks = [int(re.search(r'class="rank">(\d+)\.', b).group(1)) for b in blocks]
    assert ranks == [1, 2, 3]
    assert re.search(r'class="hit-id">([^<]*)<', blocks[0]).group(1) == own_id  # its own document first
    scores = [float(re.search(r'class="score">([-\d.]+)<', b).group(1)) for b in blocks]
    assert scores == sorted(scores, reverse=True)
    # Pygments' keyword class on 'def', and its CSS in the page
    assert '<span class="k">def</span>' in blocks[0] and "pre.code .k" in html
    # python-tokenize's identifiers marked, the function's name among them
    marks = re.findall(r'<mark class="entity" data-kind="identifier"[^>]*>(.*?)</mark>', blocks[0], re.S)
    assert "read_config" in [re.sub(r"<[^>]+>", "", m) for m in marks]
    timing = re.search(r'<p id="timing"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert re.search(r"3 hits in [\d.]+ ms \(encoding [\d.]+ ms, search [-\d.]+ ms\)", timing)


def test_the_page_without_a_query_is_the_form(served):
    response = served.client.get("/")
    assert response.status_code == 200
    assert '<input name="q"' in response.text and "<ol" not in response.text and 'id="error"' not in response.text
    assert "6 documents (flat index)" in response.text


def test_page_text_is_escaped(served):
    response = served.client.get("/", params={"q": "<script>alert(1)</script>", "k": "2"})
    assert response.status_code == 200
    assert "<script>alert" not in response.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


# --- the JSON API ------------------------------------------------------------------------


def test_api_search_gives_the_hits_with_entities_best_first(served):
    own_id, code = served.by_name["count_words"]
    response = served.client.get("/api/search", params={"q": code, "k": "5"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"query", "k", "took_ms", "model_ms", "batch", "hits"} and body["batch"] == 1
    assert body["query"] == code and body["k"] == 5
    assert body["took_ms"] >= body["model_ms"] >= 0
    hits = body["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5] and hits[0]["id"] == own_id
    assert all(set(h) == {"rank", "id", "score", "text", "entities"} for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    # the same ranking as the Python API with the same (already loaded) model
    expected = served.searcher.index.search(served.searcher.model, code, k=5)
    assert [h["id"] for h in hits] == [h.id for h in expected]
    top = hits[0]
    assert top["text"] == code
    assert top["entities"] and all(top["text"][e["start"]:e["end"]] == e["text"] and e["kind"] == "identifier"
                                   for e in top["entities"])
    assert {"count_words", "counts", "split"} <= {e["text"] for e in top["entities"]}
    assert "def" not in {e["text"] for e in top["entities"]}  # keywords are not entities


def test_k_above_the_index_size_ranks_all_documents_and_says_so(served):
    body = served.client.get("/api/search", params={"q": "sort numbers", "k": "50"}).json()
    assert body["k"] == 6 and len(body["hits"]) == 6
    assert "holds 6 documents" in body["notes"][0]


def test_health(served):
    response = served.client.get("/api/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok" and health["index_size"] == 6 and health["index_kind"] == "flat"
    assert health["model"] == served.searcher.model.name and health["backbone"] == "hf-encoder"
    assert health["extractor"] == "python-tokenize" and "Python code" in health["extractor_reason"]


# --- bad requests ------------------------------------------------------------------------

BAD = [
    ({"q": ""}, 400, "the query is empty"),
    ({"q": "   \t "}, 400, "the query is empty"),
    ({}, 400, "the query is empty"),
    ({"q": "parse a date", "k": "0"}, 400, "k=0 is out of range; give how many hits to show, 1 to 1000"),
    ({"q": "parse a date", "k": "abc"}, 400, "k='abc' is not a whole number"),
    ({"q": "parse a date", "k": "2.5"}, 400, "is not a whole number"),
    ({"q": "parse a date", "k": "100000"}, 400, "k=100000 is out of range"),
    ({"q": "x" * 1_000_000, "k": "3"}, 413, "the query is 1,000,000 characters long; the limit is 10,000"),
]


def get(app, path: str, params: dict) -> tuple[int, str]:
    """GET through the ASGI interface itself: httpx refuses to send a URL over 64 KB, a server
    may be sent anything."""
    import asyncio
    from urllib.parse import urlencode

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": urlencode(params).encode(), "root_path": "",
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


@pytest.mark.parametrize("params, status, message", BAD)
def test_bad_api_requests_get_a_4xx_that_says_what_to_change(served, params, status, message):
    code, text = get(served.app, "/api/search", params)
    assert code == status
    assert message in json.loads(text)["error"] and json.loads(text)["status"] == status


@pytest.mark.parametrize("params, status, message", [case for case in BAD if case[0]])
def test_bad_page_requests_show_the_message_in_the_error_element(served, params, status, message):
    code, text = get(served.app, "/", params)
    assert code == status
    shown = re.search(r'<p id="error" class="error"[^>]*>(.*?)</p>', text, re.S)
    assert shown and message in unescape(shown.group(1))
    assert "<ol" not in text and len(text) < 20_000  # no hits, and not the 1 MB query back


@pytest.mark.parametrize("body, status, message", [
    (json.dumps({"q": "x" * 1_000_000}), 413, "the limit is 10,000 characters"),
    (json.dumps({"q": "parse a date", "k": True}), 400, "k='True' is not a whole number"),
    (json.dumps({"q": ["parse"]}), 400, "q must be a string"),
    (json.dumps(["parse a date"]), 400, "must be a JSON object"),
    ("q=parse", 400, "the body is not JSON"),
])
def test_bad_posts_get_a_4xx_that_says_what_to_change(served, body, status, message):
    response = served.client.post("/api/search", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status and message in response.json()["error"]


def test_a_long_query_can_be_posted(served):
    own_id, code = served.by_name["send_mail"]
    response = served.client.post("/api/search", json={"q": code, "k": 2})
    assert response.status_code == 200 and response.json()["k"] == 2 and response.json()["hits"][0]["id"] == own_id


def test_an_internal_error_is_a_500_without_details_and_is_logged(served, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("secret detail of the failure")

    monkeypatch.setattr(served.searcher.model, "encode_query", broken)
    with caplog.at_level("ERROR", logger="structret.serve"):
        api = served.client.get("/api/search", params={"q": "parse a date"})
        page = served.client.get("/", params={"q": "parse a date"})
    assert api.status_code == 500 and "internal error (RuntimeError)" in api.json()["error"]
    assert page.status_code == 500 and 'id="error"' in page.text and "internal error" in page.text
    for text in (api.text, page.text):
        assert "secret detail" not in text and "Traceback (most recent call last)" not in text
    assert "secret detail of the failure" in caplog.text  # the log has it, with the traceback
    assert caplog.records[0].exc_info is not None


def test_structrets_own_error_during_a_search_is_a_500_with_its_sentence(served, monkeypatch):
    from structret.search.saved import IndexInputError

    def damaged(*args, **kwargs):
        raise IndexInputError("HNSW search found fewer than k=5 neighbours; raise ef")

    monkeypatch.setattr(served.searcher.index, "search_vectors", damaged)
    api = served.client.get("/api/search", params={"q": "parse a date"})
    assert api.status_code == 500 and api.json()["error"] == \
        "the search failed: HNSW search found fewer than k=5 neighbours; raise ef"


def _hold_the_first_forward(monkeypatch, searcher, waiting: int):
    """Make the first encoding wait until ``waiting`` more queries are queued, so they form one batch."""
    real = searcher.model.encode_query
    calls = []

    def held(texts, **kwargs):
        calls.append(list(texts))
        if len(calls) == 1:
            deadline = time.monotonic() + 30
            while len(searcher._queue) < waiting and time.monotonic() < deadline:
                time.sleep(0.005)
        # one text at a time, so a batch's vectors are bit-for-bit each query's own: the tiny
        # model scores every text almost alike, and batch padding's last-bit differences would
        # reorder near-ties (the backbone's batch invariance is tested in test_backbones)
        return np.concatenate([real([t], **kwargs) for t in texts]) if texts else real(texts, **kwargs)

    monkeypatch.setattr(searcher.model, "encode_query", held)
    return calls


def test_concurrent_queries_are_encoded_together_and_each_gets_its_own_answer(served, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    searcher = served.searcher
    names = ["read_config", "count_words", "send_mail", "read_config", "count_words"]
    ks = [3, 5, 2, 5, 3]
    alone = [searcher.search(served.by_name[n][1], k) for n, k in zip(names, ks)]
    calls = _hold_the_first_forward(monkeypatch, searcher, waiting=len(names) - 1)
    real_search = searcher.index.search_vectors
    # row by row, for the same reason as the encoding: a [5, dim] matmul rounds its last bits
    # unlike five [1, dim] ones, and near-ties would reorder
    monkeypatch.setattr(searcher.index, "search_vectors",
                        lambda vectors, k: [real_search(vectors[i:i + 1], k)[0] for i in range(len(vectors))])
    with ThreadPoolExecutor(len(names) + 1) as pool:
        first = pool.submit(searcher.search, "parse a date", 4)
        while not calls:
            time.sleep(0.005)
        together = list(pool.map(lambda a: searcher.search(served.by_name[a[0]][1], a[1]), zip(names, ks)))
    assert first.result().batch == 1 and len(first.result().hits) == 4
    assert [len(c) for c in calls] == [1, len(names)]  # the lone query, then all the waiting ones at once
    for got, expected, k in zip(together, alone, ks):
        assert got.batch == len(names) and got.k == k and len(got.hits) == k
        assert [h.id for h in got.hits] == [h.id for h in expected.hits]
        assert [h.score for h in got.hits] == [h.score for h in expected.hits]
        assert [h.entities for h in got.hits] == [h.entities for h in expected.hits]


def test_an_error_in_a_batch_reaches_every_query_in_it_and_the_next_batch_is_served(served, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    searcher = served.searcher
    calls = _hold_the_first_forward(monkeypatch, searcher, waiting=3)
    real_search = searcher.index.search_vectors
    broken_once = []

    def search_vectors(vectors, k):
        if len(vectors) == 3 and not broken_once:
            broken_once.append(k)
            raise RuntimeError("the batch failed")
        return real_search(vectors, k)

    monkeypatch.setattr(searcher.index, "search_vectors", search_vectors)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(searcher.search, "parse a date", 2)
        while not calls:
            time.sleep(0.005)
        batch = [pool.submit(searcher.search, q, 2) for q in ("read a file", "send mail", "sort")]
    assert len(first.result().hits) == 2
    for future in batch:
        with pytest.raises(RuntimeError, match="the batch failed"):
            future.result()
    assert len(searcher.search("count words", 2).hits) == 2  # the searcher is not left busy


def test_the_model_is_loaded_once_when_the_app_is_made_and_never_by_a_request(served):
    assert served.loads_to_create == 1, served.loads
    before = len(served.loads)
    for query in ("read a file", "send mail", "sort"):
        assert served.client.get("/api/search", params={"q": query, "k": "2"}).status_code == 200
        assert served.client.get("/", params={"q": query}).status_code == 200
        assert served.client.get("/api/health").status_code == 200
    assert len(served.loads) == before, served.loads[before:]


@pytest.mark.parametrize("options, message", [
    (["--extractor", "no-such-extractor"], "no-such-extractor"),
    (["--extractor", "tree-sitter"], "cannot read the indexed texts: the tree-sitter extractor needs the language"),
    (["--extractor", "python-tokenize", "--language", "go"], "reads Python only, not go"),
    (["--extractor-option", "node_types=identifier"], "goes with --extractor NAME"),
])
def test_serve_refuses_what_it_cannot_use_before_listening(served, options, message):
    from click.testing import CliRunner

    from structret.cli import cli

    result = CliRunner().invoke(cli, ["serve", str(served.dir), "--port", "1", *options])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output and "serving on" not in result.output


def test_a_missing_web_package_is_named_with_the_install_command(served, monkeypatch):
    from click.testing import CliRunner

    from structret.cli import cli

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import now fails as if uninstalled
    result = CliRunner().invoke(cli, ["serve", str(served.dir)])
    assert result.exit_code == 1 and "structret serve needs uvicorn, which is not installed: pip install" in \
        result.output and "Traceback" not in result.output, result.output


def test_serve_refuses_another_models_queries(tmp_path, served, tiny_t5_dir):  # noqa: F811
    from click.testing import CliRunner

    from structret.cli import cli

    result = CliRunner().invoke(cli, ["serve", str(served.dir), "--model", str(tiny_t5_dir)])
    assert result.exit_code == 1 and "scores between different models mean nothing" in result.output, result.output


# --- a real server -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_structret_serve_answers_http_on_loopback(served, tmp_path):
    import httpx

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), *sys.path]),
           "OMP_NUM_THREADS": "1"}
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "structret.cli", "serve", str(served.dir), "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300  # loading torch on a busy 2-core machine
        while True:
            assert server.poll() is None, log.read_text()
            try:
                health = httpx.get(f"{base}/api/health", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        assert health.status_code == 200 and health.json()["index_size"] == 6
        own_id, code = served.by_name["join_paths"]
        found = httpx.get(f"{base}/api/search", params={"q": code, "k": 2}, timeout=60)
        assert found.status_code == 200 and found.json()["hits"][0]["id"] == own_id
        page = httpx.get(f"{base}/", params={"q": code}, timeout=60)
        assert page.status_code == 200 and '<li class="hit" id="hit-1">' in page.text
        empty = httpx.get(f"{base}/api/search", params={"q": " "}, timeout=60)
        assert empty.status_code == 400 and "empty" in empty.json()["error"]
        # a query over the app's limit in a URL that still fits uvicorn's h11 parser (16 KB): the
        # app's 413. (A far longer URL is closed by uvicorn itself, a reset or a 400 depending on
        # timing and parser, so it is not what this test pins down.)
        long = httpx.get(f"{base}/api/search", params={"q": "x" * 12_000}, timeout=60)
        assert long.status_code == 413 and "the limit is 10,000 characters" in long.json()["error"]
        huge = httpx.post(f"{base}/api/search", json={"q": "x" * 1_000_000}, timeout=60)
        assert huge.status_code == 413 and "the limit is 10,000 characters" in huge.json()["error"]
        printed = log.read_text()
        assert f"serving on http://127.0.0.1:{port}/" in printed and "only this machine can connect" in printed
        assert "entities: python-tokenize" in printed
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_a_public_address_is_warned_about():
    assert "only this machine" in " ".join(bind_lines("127.0.0.1", 8000))
    public = " ".join(bind_lines("0.0.0.0", 8000))
    assert "warning" in public and "no authentication" in public and "--host 127.0.0.1" in public


# --- products: aspects and the product template ------------------------------------------


def _product_app(tiny_bert_dir, text_format, options, texts, **app_options):  # noqa: F811
    from starlette.testclient import TestClient

    from structret.linearization import TextFormat
    from structret.serving import create_app

    model = structret.load_model(str(tiny_bert_dir))
    model.text_format = TextFormat(text_format, options)
    ids = [f"item{i}" for i in range(len(texts))]
    index = structret.build_index(model, model.encode_document(texts), ids=ids, texts=texts)
    return TestClient(create_app(index, model, **app_options), raise_server_exceptions=False)


@pytest.mark.parametrize("aspects", [["brand", "color", "product-type"], "brand,color,product-type"])
def test_aspect_layout_hits_show_their_aspects(tiny_bert_dir, aspects):  # noqa: F811
    texts = ["[BRAND] acme [COLOR] red [PRODUCT_TYPE] kettle [SEP] [C] Acme kettle A red kettle for tea",
             "[BRAND] [COLOR] blue [PRODUCT_TYPE] mug [SEP] [C] Blue mug A mug"]
    client = _product_app(tiny_bert_dir, "aspects", {"aspects": aspects}, texts)
    health = client.get("/api/health").json()
    assert health["extractor"] is None and "not Python code" in health["extractor_reason"]  # no run says which
    html = client.get("/", params={"q": "red kettle", "k": "2"}).text
    block = next(b for b in _hit_blocks(html) if "item0" in b)
    rows = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block))
    assert rows == {"brand": "acme", "color": "red", "product-type": "kettle"}
    assert '<div class="text">' in block and "Acme kettle A red kettle for tea" in re.sub(r"<[^>]+>", "", block)
    other = next(b for b in _hit_blocks(html) if "item1" in b)
    assert dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", other))["brand"] == "&mdash;"  # absent aspect


def test_product_template_hits_mark_title_words_in_the_description(tiny_bert_dir):  # noqa: F811
    texts = ["title : Acme Red Kettle text : A red kettle by Acme for tea", "title : Blue Mug text : A mug"]
    client = _product_app(tiny_bert_dir, "product", {}, texts, extractor="title-overlap")
    hits = client.get("/api/search", params={"q": "kettle", "k": "2"}).json()["hits"]
    kettle = next(h for h in hits if h["id"] == "item0")
    assert [(e["text"], e["kind"]) for e in kettle["entities"]] == \
        [("red", "title-match"), ("kettle", "title-match"), ("Acme", "title-match")]
    assert all(kettle["text"][e["start"]:e["end"]] == e["text"] for e in kettle["entities"])
    assert all(e["start"] > kettle["text"].index(" text : ") for e in kettle["entities"])  # description only


def test_marks_nest_inside_highlighting_and_overlaps_are_dropped():
    from structret.records import Entity
    from structret.serving.page import marked

    text = "x = foo.bar(1) < y"
    html = marked(text, [Entity(4, 11, "foo.bar", "attribute"), Entity(4, 7, "foo", "identifier"),
                         Entity(17, 18, "y", "identifier")], language="python")
    assert unescape(re.sub(r"<[^>]+>", "", html)) == text and "&lt;" in html
    assert html.count("<mark") == html.count("</mark>") == 2  # foo.bar (the longer, first) and y
    first = re.search(r'<mark class="entity" data-kind="attribute"[^>]*>(.*?)</mark>', html).group(1)
    assert re.sub(r"<[^>]+>", "", first) == "foo.bar" and first.count('<span class="n">') == 2
    # tags nest: every span opened inside a mark is closed inside it
    assert first.count("<span") == first.count("</span>")
    assert marked("a b", [], 2, 3) == "b"  # a slice, plain text without a language


def test_text_format_linearizers_read_their_texts_back_into_fields():
    registry = get_registry()
    aspects = registry.create("linearizer", "aspects", aspects=["brand", "category 1"])
    text = "[BRAND] nike [CATEGORY_1] shoes, running [SEP] [C] Air Zoom"
    layout = aspects.fields(text)
    assert layout.kind == "aspects"
    assert [(f.name, text[f.start:f.end]) for f in layout.fields] == [("brand", "nike"),
                                                                       ("category 1", "shoes, running")]
    assert text[layout.body.start:layout.body.end] == "Air Zoom"
    unnamed = registry.create("linearizer", "aspects")
    assert [f.name for f in unnamed.fields("[COLOR_NAME] red [SEP] [C] x").fields] == ["color name"]
    product = "title : Kettle text : boils water"
    got = registry.create("linearizer", "product").fields(product)
    assert product[got.fields[0].start:got.fields[0].end] == "Kettle" and product[got.body.start:] == "boils water"
    assert unnamed.fields("no layout here") is None


# --- which entities ------------------------------------------------------------------------

PYTHON = [f'def {n}({a}):\n    """{d}"""\n    {b}\n' for n, a, d, b in FUNCTIONS]
PROSE = ["Read a configuration file.", "hello", "A red kettle for tea, by Acme."]


def test_the_extractor_follows_what_the_run_recorded_then_the_data():
    chosen = choose_marker({"go": "tree-sitter"}, PROSE)
    assert chosen.name == "tree-sitter" and chosen.language == "go" and "of go code" in chosen.reason
    both = {"python": "python-tokenize", "go": "tree-sitter"}
    assert choose_marker(both, PYTHON).name == "python-tokenize"
    assert choose_marker(both, PROSE, language="go").name == "tree-sitter"
    assert choose_marker(both, PROSE) is None  # code of an unknown language: nothing rather than a guess
    assert choose_marker({"": "title-overlap"}, PROSE).name == "title-overlap"  # products
    assert choose_marker({}, PYTHON).name == "python-tokenize"  # a model that records none: the defaults
    assert choose_marker({}, PROSE) is None
    assert choose_marker({}, PROSE, language="go").name == "tree-sitter"
    assert choose_marker({}, PYTHON, name="none") is None
    assert choose_marker(both, PYTHON, name="python-tokenize").reason == "--extractor python-tokenize"
    with pytest.raises(PluginError, match="goes with --extractor NAME"):
        choose_marker({}, PYTHON, options={"node_types": "identifier"})
    with pytest.raises(PluginError):
        choose_marker({}, PYTHON, name="no-such-extractor")


def test_python_is_told_from_prose():
    assert looks_like_python(PYTHON) and not looks_like_python(PROSE) and not looks_like_python([])


def test_a_trained_runs_extractor_is_the_one_served(tmp_path, tiny_bert_dir):  # noqa: F811
    """The whole path: 'structret train' with mep records its extractor; serving its index marks those entities."""
    from starlette.testclient import TestClient

    from structret.serving import create_app

    data = write_functions(tmp_path / "functions.jsonl.gz", partition="train")
    run = structret.train(data=f"codesearchnet:{data}", out=str(tmp_path / "run"), backbone="hf-encoder",
                          model=str(tiny_bert_dir), objective="sda+mep", max_steps=1, batch_size=4,
                          checkpoint_every=0, settings={"mep.extractor": "tree-sitter", "mep.lm_warmup": 0,
                                                        "passage_max_len": 32})
    model = run.load_model()
    assert model.recipe["plugins"]["mep"]["extractor"] == "tree-sitter"
    assert model.entities == {"python": "tree-sitter"}  # what mep used, recorded by the run
    index = structret.build_index(model, f"codesearchnet:{data}", show_progress=False)
    index.save(tmp_path / "idx")
    client = TestClient(create_app(tmp_path / "idx", language="python"))
    health = client.get("/api/health").json()
    assert health["extractor"] == "tree-sitter" and "learned to predict tree-sitter" in health["extractor_reason"]
    hit = client.get("/api/search", params={"q": "parse a date", "k": "1"}).json()["hits"][0]
    assert hit["entities"] and {e["kind"] for e in hit["entities"]} == {"identifier"}


def test_importing_the_serving_package_loads_no_web_stack_or_torch():
    code = ("import sys, structret.serving, structret.cli\n"
            "print(sorted(m for m in ('torch', 'starlette', 'uvicorn', 'pygments') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), *sys.path])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
