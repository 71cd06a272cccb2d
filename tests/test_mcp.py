"""structret mcp: a project's index as MCP tools, driven by the SDK's own client, in-process."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.cli import cli
from structret.errors import StructretError

pytest.importorskip("mcp", reason="the mcp extra (pip install 'structret[mcp]')")

CONFIG = '''def load_settings(path):
    """Read the configuration file."""
    raw = open(path).read()
    return parseConfig(raw)


def retry_request(call, times=3):
    for _ in range(times):
        try:
            return call()
        except IOError:
            pass
'''
WEB = '''function debounce(fn, wait) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), wait); };
}
'''


@pytest.fixture
def project_index(tmp_path, tiny_bert_dir, monkeypatch, fresh_registry):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "project"
    (root / "app").mkdir(parents=True)
    (root / "web").mkdir()
    (root / "app" / "settings.py").write_text(CONFIG)
    (root / "web" / "util.js").write_text(WEB)
    result = CliRunner().invoke(cli, ["index", str(root), "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                      "--out", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    return root, tmp_path / "idx"


def _call(server, name, arguments):
    from mcp import Client

    async def go():
        async with Client(server, raise_exceptions=True) as client:
            tools = await client.list_tools()
            result = await client.call_tool(name, arguments)
            return tools, result

    return asyncio.run(go())


def _payload(result):
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content)
    return json.loads(result.content[0].text)


def test_an_agent_lists_the_tools_and_searches_the_project(project_index):
    from structret.api import create_mcp_server

    _, idx = project_index
    tools, result = _call(create_mcp_server(idx), "search", {"query": "read the config", "k": 3})
    names = {t.name: t for t in tools.tools}
    assert set(names) == {"search", "related", "refresh"}
    assert "path" in names["search"].input_schema["properties"] and "query" in names["search"].input_schema["required"]
    assert not result.is_error
    hits = _payload(result)
    assert [h["rank"] for h in hits] == [1, 2, 3]
    locations = {h["location"] for h in hits}
    assert locations == {"app/settings.py:1-4", "app/settings.py:7-12", "web/util.js:1-4"}
    first = next(h for h in hits if h["location"] == "app/settings.py:1-4")
    assert first["snippet"][0]["matches"] and "text" not in first  # the lines, not the whole file
    assert first["scope"] == ""  # a top-level function: no enclosing class


def test_related_gives_a_units_callers_callees_and_neighbours(tmp_path, tiny_bert_dir, monkeypatch, fresh_registry):
    from structret.api.mcp import ProjectTools

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "project"
    (root / "app").mkdir(parents=True)
    (root / "app" / "settings.py").write_text(CONFIG + "\n\nclass Parser:\n    def parse(self, raw):\n"
                                              "        return parseConfig(raw)\n\n\ndef parseConfig(raw):\n"
                                              "    return dict(line.split('=') for line in raw.splitlines())\n")
    done = CliRunner().invoke(cli, ["index", str(root), "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                    "--out", str(tmp_path / "idx")])
    assert done.exit_code == 0, done.output
    tools = ProjectTools(tmp_path / "idx")
    got = tools.related("app/settings.py", 21, k=2)  # inside parseConfig
    assert got["unit"]["location"] == "app/settings.py:20-21" and got["unit"]["name"] == "parseConfig"
    assert {c["name"] for c in got["callers"]} == {"load_settings", "Parser.parse"} and got["callees"] == []
    assert len(got["neighbours"]) == 2 and all(n["location"] != "app/settings.py:20-21" for n in got["neighbours"])
    method = tools.related("app/settings.py", 16)
    assert method["unit"]["scope"] == "Parser" and [c["name"] for c in method["callees"]] == ["parseConfig"]
    assert any(h["scope"] == "Parser" for h in tools.search("parse the raw text", k=5))
    with pytest.raises(StructretError, match="not a file of this index"):
        tools.related("nowhere.py", 1)
    with pytest.raises(StructretError, match="holds line 500"):
        tools.related("app/settings.py", 500)


def test_a_path_filter_keeps_a_folder_or_a_glob(project_index):
    from structret.api.mcp import ProjectTools

    _, idx = project_index
    tools = ProjectTools(idx)
    assert {h["path"] for h in tools.search("wait for it", k=5, path="web")} == {"web/util.js"}
    assert {h["path"] for h in tools.search("wait for it", k=5, path="*.py")} == {"app/settings.py"}
    assert tools.search("wait for it", k=5, path="nowhere/") == []
    with pytest.raises(StructretError, match="1 to 50"):
        tools.search("x", k=0)
    with pytest.raises(StructretError, match="query is empty"):
        tools.search("   ")


def test_refresh_reindexes_the_recorded_folder_and_searches_the_new_index(project_index):
    from structret.api import create_mcp_server

    root, idx = project_index
    server = create_mcp_server(idx)
    (root / "web" / "util.js").write_text(WEB + "\nfunction clampValue(v, lo, hi) {\n  return Math.min(hi, Math.max(lo, v));\n}\n")
    (root / "app" / "settings.py").write_text(CONFIG.split("\n\n\ndef retry_request")[0] + "\n")

    async def go():
        from mcp import Client

        async with Client(server, raise_exceptions=True) as client:
            refreshed = _payload(await client.call_tool("refresh", {}))
            found = _payload(await client.call_tool("search", {"query": "clamp a value", "k": 5}))
            return refreshed, found

    refreshed, found = asyncio.run(go())
    assert refreshed["new_or_edited"] == 1 and refreshed["gone_or_edited"] == 1 and refreshed["encoded"] == 1
    assert refreshed["units"] == 3 and refreshed["files_cut"] == 2  # updated in place, not rebuilt
    assert {h["location"] for h in found} == {"app/settings.py:1-4", "web/util.js:1-4", "web/util.js:6-8"}


def test_a_tool_error_reaches_the_agent_as_a_sentence(project_index):
    from structret.api import create_mcp_server

    _, idx = project_index

    async def go():
        from mcp import Client

        async with Client(create_mcp_server(idx)) as client:
            return await client.call_tool("search", {"query": "x", "k": 500})

    result = asyncio.run(go())
    assert result.is_error and "1 to 50" in result.content[0].text


def test_the_command_says_what_it_serves_and_refuses_a_non_index(tmp_path):
    shown = CliRunner().invoke(cli, ["mcp", "--help"])
    assert shown.exit_code == 0 and "search(query, k=10, path=None)" in shown.output and "structret mcp runs/" in shown.output
    (tmp_path / "empty").mkdir()
    refused = CliRunner().invoke(cli, ["mcp", str(tmp_path / "empty")])
    assert refused.exit_code != 0 and "Traceback" not in refused.output


def test_structret_mcp_answers_over_stdio(project_index, tmp_path):
    """The command itself, as an agent starts it: a child process speaking MCP on its stdin/stdout."""
    import os
    import sys

    from mcp import Client, StdioServerParameters

    _, idx = project_index
    params = StdioServerParameters(command=sys.executable, args=["-m", "structret.cli", "mcp", str(idx)],
                                   env={**os.environ, "STRUCTRET_CACHE": str(tmp_path / "cache")})

    async def go():
        from mcp.client.stdio import stdio_client

        with open(os.devnull, "w") as quiet:  # the child's stderr: pytest's captured one has no file descriptor
            async with Client(stdio_client(params, errlog=quiet), raise_exceptions=True) as client:
                return _payload(await client.call_tool("search", {"query": "debounce", "k": 1, "path": "web"}))

    (hit,) = asyncio.run(go())
    assert hit["location"] == "web/util.js:1-4" and hit["rank"] == 1
