"""structret serve in a real browser: headless Chromium, driven by Playwright, against a real
``structret serve`` subprocess. A user types a query and presses Enter, sees the expected hit
first with its entities marked, then submits a blank query and sees the error.

Needs Chromium and the playwright package (Debian: ``apt-get install -y chromium`` as root, and
``pip install -e '.[test]'``; another Chromium binary: ``STRUCTRET_CHROMIUM=/path/to/chrome``).
Without them the tests are skipped, except under CI (``CI`` set, as .ci/run sets it), where a
missing browser is a failure: a CI that silently skips its only browser test tests nothing.

Screenshots (full page PNG) of the results page and of the error page are written to
``$STRUCTRET_SCREENSHOTS`` (default: pytest's tmp_path). The docs' screenshots come from the
MiniLM case; refresh them with
``STRUCTRET_SCREENSHOTS=docs/img python -m pytest tests/test_browser.py``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from test_serve import FUNCTIONS, _free_port, write_functions

import structret

ROOT = Path(__file__).resolve().parents[1]
# what the README's test step installs; one sentence for the skip and for the CI failure
INSTALL = ("apt-get install -y chromium (Debian; as root) and pip install -e '.[test]' (playwright); "
           "or point STRUCTRET_CHROMIUM at a Chromium binary")
VIEWPORT = {"width": 1100, "height": 800}


def in_ci(environ=os.environ) -> bool:
    """CI=true (GitHub, GitLab, .ci/run); an empty, 0 or false CI is a developer's shell."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def chromium_path(environ=os.environ) -> str | None:
    given = environ.get("STRUCTRET_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    search = environ.get("PATH", os.defpath)
    return shutil.which("chromium", path=search) or shutil.which("chromium-browser", path=search)


def missing_browser_parts(environ=os.environ) -> list[str]:
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package is not installed")
    if chromium_path(environ) is None:
        given = environ.get("STRUCTRET_CHROMIUM")
        missing.append(f"STRUCTRET_CHROMIUM={given} is not an executable file" if given else
                       "no chromium on PATH")
    return missing


def require_browser(environ=os.environ) -> str:
    """The Chromium binary to drive; else a skip, or under CI a failure, saying how to install it."""
    missing = missing_browser_parts(environ)
    if not missing:
        return chromium_path(environ)
    message = f"the browser tests cannot run: {'; '.join(missing)}. Install: {INSTALL}"
    if in_ci(environ):
        pytest.fail(message + " (this fails rather than skips because CI is set)", pytrace=False)
    pytest.skip(message)


# --- the gate itself: a missing browser must not pass CI quietly ------------------------------


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(tmp_path):
    nowhere = {"STRUCTRET_CHROMIUM": str(tmp_path / "no-chromium"), "PATH": ""}
    with pytest.raises(pytest.fail.Exception, match=r"no-chromium is not an executable file.*apt-get install -y "
                                                    r"chromium.*because CI is set"):
        require_browser({**nowhere, "CI": "true"})
    for developer in ({}, {"CI": ""}, {"CI": "false"}):
        with pytest.raises(pytest.skip.Exception, match=r"apt-get install -y chromium") as skipped:
            require_browser({**nowhere, **developer})
        assert "because CI is set" not in str(skipped.value)


def test_a_missing_playwright_is_named_too(tmp_path, monkeypatch):
    fake = tmp_path / "chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # import now fails as if uninstalled
    with pytest.raises(pytest.fail.Exception, match=r"cannot run: the playwright package is not installed\. "
                                                    r"Install: .*pip install -e '\.\[test\]'"):
        require_browser({"STRUCTRET_CHROMIUM": str(fake), "CI": "1"})


def test_a_present_browser_is_the_one_driven(tmp_path):
    fake = tmp_path / "chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    pytest.importorskip("playwright.sync_api")  # the package half of the gate; the path half is this test's
    assert require_browser({"STRUCTRET_CHROMIUM": str(fake), "CI": "true"}) == str(fake)


# --- a real server over a small index --------------------------------------------------------


@contextmanager
def running_server(index_dir: Path, log: Path):
    """``structret serve INDEX_DIR`` on a free loopback port, as a user starts it; yields its URL."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), *sys.path]),
           "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "structret.cli", "serve", str(index_dir), "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 300  # loading torch and a model on a busy 2-core machine
        while True:
            assert server.poll() is None, f"structret serve exited:\n{log.read_text()}"
            try:
                with urllib.request.urlopen(base + "api/health", timeout=5) as answer:
                    assert answer.status == 200
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"structret serve did not answer:\n{log.read_text()}"
                time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=60)


def _tiny_case(tmp: Path, tiny_bert_dir: Path) -> SimpleNamespace:  # noqa: F811
    """FUNCTIONS under the tiny random BERT. The query is a document's own code, so that document is
    first whatever the random weights are; typed on one line, as a text box keeps no line breaks
    (the tokenizer splits on any whitespace, so the tokens are the document's)."""
    data = write_functions(tmp / "functions.jsonl.gz")
    model = structret.load_model(str(tiny_bert_dir))
    index = structret.build_index(model, f"codesearchnet:{data}", show_progress=False)
    index.save(tmp / "idx")
    own_id, code = next((i, t) for i, t in index.texts.items() if "def join_paths(" in t)
    return SimpleNamespace(name="tiny", dir=tmp / "idx", model=model, index=index, k=3,
                           query=" ".join(code.split()), expected_top=own_id, shots=None)


def _minilm_case(tmp: Path) -> SimpleNamespace:
    """The docs' case: the bundled MiniLM over the functions mined from the running Python's json
    package (a dozen, encoded in seconds), asked in words. The top hit is whatever MiniLM ranks
    first, which the test takes from the Python API with the same model and index."""
    from structret.mining import mine

    data = tmp / "json.jsonl.gz"
    mine(Path(json.__file__).parent, "python", data, show_progress=False)
    model = structret.load_model("minilm")
    index = structret.build_index(model, f"codesearchnet:{data}", show_progress=False)
    index.save(tmp / "idx")
    query = "parse JSON text into a Python object"
    return SimpleNamespace(name="minilm", dir=tmp / "idx", model=model, index=index, k=3, query=query,
                           expected_top=index.search(model, query, k=1)[0].id,
                           shots=("serve-results.png", "serve-error.png"))


@pytest.fixture(scope="module")
def browser():
    executable = require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Debian's Chromium rather than Playwright's own build: `playwright install` downloads from
        # a CDN that a CI machine may not reach, and apt is there anyway
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module", params=["tiny", pytest.param("minilm", marks=pytest.mark.slow)])
def case(request, tmp_path_factory, browser):
    # the browser first: without it, no minutes spent loading models for a test that cannot run
    tmp = tmp_path_factory.mktemp(f"browser-{request.param}")
    made = (_tiny_case(tmp, request.getfixturevalue("tiny_bert_dir")) if request.param == "tiny"
            else _minilm_case(tmp))
    with running_server(made.dir, tmp / "server.log") as base:
        made.base = base
        yield made


def _screenshot_dir(tmp_path: Path, case) -> Path:
    given = os.environ.get("STRUCTRET_SCREENSHOTS")
    # only the MiniLM pictures are the docs'; the tiny model's would overwrite nothing useful there
    where = Path(given) if given and case.shots else tmp_path
    where.mkdir(parents=True, exist_ok=True)
    return where


def _assert_png(path: Path) -> None:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width = int.from_bytes(head[16:20], "big")
    assert width == VIEWPORT["width"], (path, width)  # the page as a user's window shows it


def test_a_user_searches_sees_the_top_hit_with_entities_then_a_blank_query_shows_the_error(case, browser, tmp_path):
    shots = _screenshot_dir(tmp_path, case)
    results_png, error_png = [shots / n for n in (case.shots or (f"{case.name}-results.png", f"{case.name}-error.png"))]
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(case.base)
        box = page.locator('form[role=search] input[name="q"]')
        assert box.is_visible() and box.input_value() == ""
        page.locator('input[name="k"]').fill(str(case.k))
        box.click()
        box.press_sequentially(case.query)  # key by key, as typed
        with page.expect_navigation() as navigated:
            box.press("Enter")  # the form's own submit: no script on the page
        assert navigated.value.status == 200
        assert page.locator("#error").count() == 0

        # the form went to GET /?q=...&k=... and kept what was typed
        assert re.search(r"[?&]q=", page.url) and re.search(rf"[?&]k={case.k}(&|$)", page.url)
        assert box.input_value() == case.query
        assert page.locator("q.query").inner_text() == case.query

        hits = page.locator("ol.hits > li.hit")
        assert hits.count() == case.k
        ranks = [int(hits.nth(i).locator(".rank").inner_text().rstrip(".")) for i in range(case.k)]
        assert ranks == list(range(1, case.k + 1))
        top = page.locator("#hit-1")
        assert top.locator(".hit-id").inner_text() == case.expected_top

        # the page ranks as the Python API does with the same model and index, scores included
        expected = case.index.search(case.model, case.query, k=case.k)
        shown_ids = [hits.nth(i).locator(".hit-id").inner_text() for i in range(case.k)]
        shown_scores = [float(hits.nth(i).locator(".score").inner_text()) for i in range(case.k)]
        assert shown_ids == [h.id for h in expected]
        assert shown_scores == pytest.approx([h.score for h in expected], abs=2e-4)  # shown to 4 decimals

        # the hit's code, highlighted, with its identifiers marked: the function's own name among them
        code = top.locator("pre.code")
        assert code.is_visible() and code.locator("span.k", has_text="def").count() >= 1
        name = re.search(r"def (\w+)\(", case.index.texts[case.expected_top]).group(1)
        marks = top.locator('mark.entity[data-kind="identifier"]')
        assert marks.count() >= 2 and marks.first.is_visible()
        assert name in marks.all_inner_texts()
        # the mark is drawn (an underline), not only present in the markup
        underline = marks.first.evaluate("m => getComputedStyle(m).borderBottomStyle")
        assert underline == "solid"
        page.screenshot(path=str(results_png), full_page=True)

        # a blank query: the form is submitted with q= and the page says what to do
        box.fill("")
        with page.expect_navigation() as navigated:
            page.get_by_role("button", name="Search").click()
        assert navigated.value.status == 400
        error = page.locator("p#error.error")
        assert error.is_visible()
        assert "the query is empty" in error.inner_text() and "q=" in error.inner_text()
        assert page.locator("ol.hits").count() == 0
        assert box.is_visible()  # the form is still there to try again
        page.screenshot(path=str(error_png), full_page=True)
    finally:
        page.close()
    for png in (results_png, error_png):
        _assert_png(png)


@pytest.mark.slow
def test_a_hybrid_index_marks_which_side_found_each_hit(browser, tmp_path):
    """The page over a hybrid index (MiniLM + BM25 over the json package): a badge per side that
    listed each hit, and the ranking the Python API gives."""
    from structret.mining import mine

    data = tmp_path / "json.jsonl.gz"
    mine(Path(json.__file__).parent, "python", data, show_progress=False)
    model = structret.load_model("minilm")
    index = structret.build_index(model, f"codesearchnet:{data}", lexical="bm25", show_progress=False)
    index.save(tmp_path / "idx")
    query = "raw_decode a JSON document"
    expected = index.search(model, query, k=5)
    given = os.environ.get("STRUCTRET_SCREENSHOTS")
    png = (Path(given) if given else tmp_path) / "serve-hybrid.png"
    with running_server(tmp_path / "idx", tmp_path / "server.log") as base:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(base + "?" + urllib.parse.urlencode({"q": query, "k": 5}))
            assert "fused with bm25 (zscore:" in page.locator("#about").inner_text()
            hits = page.locator("ol.hits > li.hit")
            assert [hits.nth(i).locator(".hit-id").inner_text() for i in range(5)] == [h.id for h in expected]
            for i, hit in enumerate(expected):
                badges = hits.nth(i).locator(".side").all_inner_texts()
                assert badges == list(hit.sources) and badges
                assert hits.nth(i).locator(".side").first.is_visible()
            page.screenshot(path=str(png), full_page=True)
        finally:
            page.close()
    _assert_png(png)
