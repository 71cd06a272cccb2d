"""README.md's Use section runs as written: every shell line in order, then its Python block.

The setting is a user's machine in miniature: ``~/src/project`` (Python and Go), ``~/src/big``
(Java) and ``~/src/new`` under a temporary HOME, CoSQA and CoIR data in the working folder, a
Debian catalog standing in for ``/var/lib/apt/lists``, and CodeT5-base in the Hugging Face cache
as a tiny random T5 (the hub is not reachable here). What differs from the README is only what
``cut`` adds: fewer training steps, fewer seeds, and a free port for ``serve`` — each through a
documented option. A README line this harness cannot run fails the test; so does a line that
exits non-zero.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from _tiny_models import build_tiny_t5_tokenizer
from structret.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DATA = Path(__file__).parent / "data"
APT_LISTS = "/var/lib/apt/lists"  # the catalog of the machine running the README; a small one here
STANZA = """Package: {name}
Section: {section}
Priority: optional
Tag: role::program, use::{use}
Description: {verb} {thing} {how}
 {name} is a small tool to {verb} {thing} {how}.
 It is written for the {section} section of the archive.

"""
CATALOG = [("utils", "searching", "search", "text files"), ("web", "downloading", "download", "web pages"),
           ("math", "calculating", "compute", "statistics"), ("editors", "editing", "edit", "source code"),
           ("net", "monitor", "watch", "network traffic"), ("sound", "playing", "play", "audio streams")]

PROJECT = {
    "config.py": '''"""Settings of the application."""


def read_config(path):
    """Read a configuration file and return its settings as a dict."""
    settings = {}
    with open(path) as f:
        for line in f:
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def write_config(path, settings):
    """Write settings to a configuration file, one key per line."""
    with open(path, "w") as f:
        for key, value in sorted(settings.items()):
            f.write(f"{key} = {value}\\n")
    return path
''',
    "server.go": '''package server

// ParsePort reads the port number from a listen address such as ":8080".
func ParsePort(addr string) int {
	port := 0
	for _, c := range addr {
		if c >= '0' && c <= '9' {
			port = port*10 + int(c-'0')
		}
	}
	return port
}

func joinHostPort(host string, port int) string {
	// the address a server listens on
	text := host + ":"
	text += itoa(port)
	return text
}
''',
}
# (name, argument, docstring, body): enough files that each of train/valid/test gets some
TOPICS = [
    ("parse_date", "text", "Parse an ISO date string into a tuple of integers.",
     "parts = text.split('-')\n    return tuple(int(p) for p in parts)"),
    ("send_mail", "server", "Send an email message through an SMTP server and close it.",
     "server.sendmail()\n    server.quit()\n    return True"),
    ("sort_numbers", "items", "Sort a list of numbers in ascending order.",
     "result = list(items)\n    result.sort()\n    return result"),
    ("count_words", "text", "Count how often each word occurs in a text.",
     "counts = {}\n    for w in text.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts"),
    ("join_paths", "parts", "Join path parts with the separator of the system.",
     "sep = '/'\n    text = sep.join(parts)\n    return text"),
    ("hash_file", "path", "Compute the SHA-256 digest of a file in chunks.",
     "import hashlib\n    h = hashlib.sha256()\n    h.update(open(path, 'rb').read())\n    return h.hexdigest()"),
    ("retry_call", "fn", "Call a function again until it succeeds or three tries fail.",
     "for _ in range(3):\n        try:\n            return fn()\n        except OSError:\n            pass"),
    ("slugify", "title", "Turn a title into a lowercase slug for a web address.",
     "words = title.lower().split()\n    slug = '-'.join(words)\n    return slug"),
    ("mean_value", "values", "Return the arithmetic mean of a list of numbers.",
     "total = sum(values)\n    count = len(values)\n    return total / count"),
    ("read_lines", "path", "Read the lines of a text file without their newlines.",
     "with open(path) as f:\n        lines = f.read().splitlines()\n    return lines"),
    ("merge_dicts", "dicts", "Merge several dictionaries into one, later ones winning.",
     "merged = {}\n    for d in dicts:\n        merged.update(d)\n    return merged"),
    ("flatten_list", "nested", "Flatten a list of lists into one flat list.",
     "flat = []\n    for part in nested:\n        flat.extend(part)\n    return flat"),
]
JAVA = '''package big;

public class Strings%d {
    /** Reverse the characters of a string and return the new string. */
    public static String reverse%d(String text) {
        StringBuilder out = new StringBuilder(text);
        out.reverse();
        return out.toString();
    }

    /** Repeat a string a number of times, joined without a separator. */
    public static String repeat%d(String text, int times) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < times; i++) {
            out.append(text);
        }
        return out.toString();
    }
}
'''


def use_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index("## Use\n"):text.index("\n## ", text.index("## Use\n") + 1)]


def shell_lines() -> list[str]:
    """The Use section's bash block, one command per entry (continuations joined, comments kept)."""
    block = re.search(r"```bash\n(.*?)```", use_section(), re.S).group(1)
    joined = re.sub(r"\\\n\s*", "", block)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def python_block() -> str:
    return re.search(r"```python\n(.*?)```", use_section(), re.S).group(1)


def argv(line: str, home: Path) -> list[str]:
    """The arguments a POSIX shell would pass: quotes removed, comments dropped, ``~`` expanded."""
    words = shlex.split(line, comments=True)
    assert words[0] == "structret", f"README line is not a structret command: {line}"
    return [str(home) + w[1:] if w.startswith("~/") else w for w in words[1:]]


def cut(args: list[str], port: int) -> list[str]:
    """What the test adds to a README line, each a documented option: fewer steps, seeds and LM-head
    warm-up steps, the small catalog for the machine's, a free port."""
    args = [a.replace(APT_LISTS, "apt-lists") for a in args]
    command = args[0]
    if "--suite" in args and "--data" not in args:
        args += standins(args[args.index("--suite") + 1])
    trains = (command == "train" and "--list-recipes" not in args) or (
        command == "bench" and ("--recipe" in args or "--suite" in args) and "coir" not in args)
    if not trains and command != "serve":
        return args
    kept: list[str] = []
    for a in args:  # the line's own --set max_steps=N goes: one or two steps are enough here
        if a.startswith("max_steps=") and kept[-1:] == ["--set"]:
            kept.pop()
        else:
            kept.append(a)
    args = kept
    if "--seeds" in args:
        i = args.index("--seeds")
        args = args[:i + 1] + ["2" if "--recipe" in args else "1"] + args[i + 2:]
    if command == "serve":
        return args + ["--port", str(port)]
    return args + ["--set", f"max_steps={2 if command == 'train' else 1}", "--set", "batch_size=4",
                   "--set", "checkpoint_every=0", "--set", "lm_warmup_auto_steps=1"]


def standins(suite: str) -> list[str]:
    """A suite's offline stand-ins (data, backbone, settings), as options, with the small catalog for APT_LISTS."""
    import tomllib

    from structret.registry import get_registry

    entry = get_registry().get("suite", suite)  # an unknown suite fails here, not by training on the full catalog
    table = tomllib.loads(entry.read_text()) if entry.is_file else {}  # coir is built from folders of data
    args: list[str] = []
    for d in table.get("datasets", []):
        if d.get("standin_data", "").endswith(APT_LISTS):
            args += ["--data", f"{d['key']}=debian-packages:apt-lists", "--backbone", d["standin_backbone"]]
            args += [w for k, v in d.get("standin_set", {}).items() for w in ("--set", f"{k}={v}")]
    return args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_codet5(directory: Path) -> Path:
    """A random 2-layer T5 with a sentinel tokenizer: what SANTA's MEP needs of CodeT5-base."""
    import torch
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    build_tiny_t5_tokenizer(directory)
    config = T5Config(vocab_size=len(AutoTokenizer.from_pretrained(directory)), d_model=32, d_kv=16, d_ff=64,
                      num_layers=2, num_decoder_layers=2, num_heads=2, pad_token_id=0, eos_token_id=1,
                      decoder_start_token_id=0)
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(directory)
    return directory


def fake_hub_model(cache: Path, repo_id: str, build) -> None:
    """``repo_id`` in the Hugging Face hub cache layout, as a download leaves it (refs/main -> snapshot)."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    build(folder / "snapshots" / ("0" * 40))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text("0" * 40)


@pytest.fixture
def user_machine(tmp_path, monkeypatch, fresh_registry):
    home = tmp_path / "home"
    project = home / "src" / "project"
    project.mkdir(parents=True)
    for name, text in PROJECT.items():
        (project / name).write_text(text)
    for i, (name, arg, doc, body) in enumerate(TOPICS):
        (project / "app").mkdir(exist_ok=True)
        (project / "app" / f"{name}.py").write_text(f'def {name}({arg}):\n    """{doc}"""\n    {body}\n')
    big = home / "src" / "big" / "big"
    big.mkdir(parents=True)
    for i in range(6):
        (big / f"Strings{i}.java").write_text(JAVA % (i, i, i))
    new = home / "src" / "new"
    new.mkdir(parents=True)
    (new / "archive.py").write_text('def extract_archive(path, target):\n    """Extract a zip archive into a '
                                    'target folder."""\n    import zipfile\n    zipfile.ZipFile(path).extractall('
                                    'target)\n    return target\n')
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(DATA / "cosqa", work / "CoCLR" / "data" / "search")
    shutil.copytree(DATA / "coir", work / "coir-data")
    lists = work / "apt-lists"
    lists.mkdir()
    with open(lists / "Packages", "w") as f:  # 180 packages: the reader's test tenth gets some queries
        for i in range(180):
            section, use, verb, thing = CATALOG[i % len(CATALOG)]
            how = ("quickly", "from the command line", "in a terminal", "with a graphical interface")[i % 4]
            f.write(STANZA.format(name=f"{verb}-{thing.split()[0]}-{i}", section=section, use=use, verb=verb,
                                  thing=thing, how=how))
    hub = tmp_path / "hf" / "hub"
    fake_hub_model(hub, "Salesforce/codet5-base", tiny_codet5)

    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub read both when it was imported, before this test: what a fresh process would read
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(work)
    return home, work


def before(line: str, home: Path, work: Path) -> None:
    """What the user has at hand for a line that names their own files."""
    if "new.jsonl.gz" in line and not (work / "new.jsonl.gz").exists():
        from structret.mining import mine

        mine(home / "src" / "new", "python", work / "new.jsonl.gz", show_progress=False)
        with gzip.open(work / "project.jsonl.gz", "rt") as f:
            gone = json.loads(f.readline())["url"]
        (work / "gone.txt").write_text(gone + "\n")


def serve(args: list[str], port: int) -> str:
    """Start 'structret serve' as the README does, ask its JSON API one query, stop it."""
    exe = Path(sys.executable).with_name("structret")
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{port}/api/search?q=read+a+config+file&k=3"
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.read().decode()
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        raise AssertionError("serve did not answer in 120 s")
    finally:
        proc.terminate()
        proc.wait(30)


def mcp_search(args: list[str]) -> list[dict]:
    """Start 'structret mcp' as an agent does (a child on stdio), call its search tool once, stop it."""
    import asyncio

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    exe = Path(sys.executable).with_name("structret")
    params = StdioServerParameters(command=str(exe), args=args, env=dict(os.environ))

    async def ask():
        with open(os.devnull, "w") as quiet:  # the child's stderr: pytest's captured one has no file descriptor
            async with Client(stdio_client(params, errlog=quiet), raise_exceptions=True) as client:
                result = await client.call_tool("search", {"query": "read a config file", "k": 3})
                return result.structured_content["result"]

    return asyncio.run(ask())


@pytest.mark.slow
def test_the_readme_runs_as_written(user_machine, capsys):
    home, work = user_machine
    timings = []
    for line in shell_lines():
        args = cut(argv(line, home), port := free_port())
        before(line, home, work)
        started = time.perf_counter()
        if args[0] == "serve":
            answer = json.loads(serve(args, port))
            assert answer["hits"], line
        elif args[0] == "mcp":
            assert any("read_config" in json.dumps(hit["snippet"]) for hit in mcp_search(args)), line
        else:
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, f"{line}\n{result.output}\n{result.exception!r}"
            if args[0] == "search":
                assert "read_config" in result.stdout, result.stdout
        timings.append((time.perf_counter() - started, line))

    # what the lines say they write is there
    for made in ("runs/project/structret.json", "kept.report.json", "neg.report.json", "runs/idx2/structret.json",
                 "runs/big-idx/structret.json", "figs/ranking-probability.png", "figs/embeddings-2d.png",
                 "exported/onnx/model_int8.onnx", "exported/st/modules.json", "runs/dr/final/structret.json",
                 *(f"bench-out/{suite}/results.md" for suite in ("santa-ablation", "attempt", "attempt-ablation"))):
        assert (work / made).is_file(), made
    updates = json.loads((work / "runs/idx2/structret.json").read_text())["updates"]
    assert updates[-1]["added"] == 1 and updates[-1]["removed"] == 1

    code = python_block()
    short = (code.replace('settings={"mep.extractor": "tree-sitter"})',
                          'settings={"mep.extractor": "tree-sitter", "mep.lm_warmup": 1, "max_steps": 2, '
                          '"batch_size": 4, "checkpoint_every": 0})')
                 .replace('mteb.get_tasks(["CosQA"])', 'local_retrieval_task("coir:coir-data/cosqa")'))
    assert short.count("local_retrieval_task") == 1 and "max_steps" in short, "the README's Python block changed"
    pytest.importorskip("mteb")
    from structret.mteb_adapter import local_retrieval_task

    scope: dict = {"local_retrieval_task": local_retrieval_task}
    started = time.perf_counter()
    exec(compile(short, str(README), "exec"), scope)
    timings.append((time.perf_counter() - started, "the Python block"))
    assert scope["hits"] and 0 <= scope["scores"]["MRR@100 (full pool)"] <= 1
    with capsys.disabled():
        print("\nREADME lines by time:")
        for seconds, line in sorted(timings, reverse=True)[:12]:
            print(f"  {seconds:6.1f} s  {line[:100]}")
