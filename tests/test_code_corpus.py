"""benchmarks/data/code_corpus.py: packages split whole into train/valid/test, reserved sources refused.

No network: the packages are small local trees, "already downloaded and unpacked" in the cache.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _scripts import load_script

cc = load_script("data/code_corpus.py")

RESERVED_MD = """# Sources reserved for evaluation

- go: the Go standard library (golang-1.19-src, or any Go release's src/)
- javascript: node-lodash, node-q, eslint
- python: sympy, requests, python-dateutil, Jinja2
- ruby: the Ruby standard library (libruby3.1, any Ruby release's lib/)
"""


def _function(name: str, doc: str, body: str) -> str:
    return f'def {name}(x):\n    """{doc}"""\n    y = x + 1\n    {body}\n    return y\n'


def _package(cache: Path, language: str, source, files: dict[str, str]) -> None:
    """Put ``files`` where code_corpus would have downloaded and unpacked ``source``."""
    (cache / "downloads" / source.kind / source.slug).mkdir(parents=True)
    (cache / "downloads" / source.kind / source.slug / ".done").write_text(source.spec)
    tree = cache / "src" / language / source.slug
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / ".done").write_text(source.spec)


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_reserved_names_are_read_from_the_markdown_bullets(tmp_path):
    md = tmp_path / "RESERVED-SOURCES.md"
    md.write_text(RESERVED_MD)
    reserved = cc.read_reserved(md)
    assert reserved["javascript"] == {"lodash", "q", "eslint"}
    assert reserved["python"] == {"sympy", "requests", "dateutil", "jinja2"}
    assert reserved["go"] == {"golang-1-19-src"}  # from the prose, not "the", "Go", "src/"


@pytest.mark.parametrize("spec", ["npm:lodash@4.17.21", "deb:node-lodash=4.17.21-1", "pypi:Jinja2==3.1.2",
                                  "pypi:python_dateutil==2.8.2", "deb:golang-1.21-src=1.21.1-1",
                                  "deb-src:openjdk-21=21.0.1-1", "deb:libruby3.3=3.3.0-1"])
def test_a_reserved_source_is_refused_by_name(tmp_path, spec):
    md = tmp_path / "RESERVED-SOURCES.md"
    md.write_text(RESERVED_MD)
    sources = {"python": {"train": [cc.parse_source("pypi:attrs==23.1.0"), cc.parse_source(spec)],
                          "valid": [], "test": []}}
    with pytest.raises(cc.SourceError, match="reserved"):
        cc.check_not_reserved(sources, cc.read_reserved(md))


def test_a_binary_package_of_a_reserved_source_package_is_refused(tmp_path):
    md = tmp_path / "RESERVED-SOURCES.md"
    md.write_text("- php: php-laravel-framework, php-twig\n")
    sources = {"php": {"train": [cc.parse_source("deb:php-illuminate-database=8.83.26+dfsg-2")],
                       "valid": [], "test": []}}
    reserved = cc.read_reserved(md)
    cc.check_not_reserved(sources, reserved)  # the binary's own name is not listed ...
    with pytest.raises(cc.SourceError, match="php-laravel-framework is reserved"):
        cc.check_not_reserved(sources, reserved, {"php-illuminate-database": "php-laravel-framework"})


BENCHMARK_MD = RESERVED_MD + """
- semble's code-search benchmark (all 63 repositories; 18 of them are in semble-bench/ beside this file):
  aiohttp (aio-libs/aiohttp), gin (gin-gonic/gin), rails (rails/rails), gson (google/gson),
  commons-lang (apache/commons-lang), rack (rack/rack).
  Never train on their code or text (any copy: Debian, PyPI, npm, vendored).

- products: Debian package catalog entries whose package name hashes into the first half
"""


@pytest.mark.parametrize("spec", ["pypi:aiohttp==3.9.0", "deb:golang-github-gin-gonic-gin-dev=1.8.1-1",
                                  "deb:ruby-rack=2.2.22-0+deb12u1", "deb-src:commons-lang3=3.12.0-2",
                                  "deb:libgoogle-gson-java=2.10-1"])
def test_a_benchmark_repository_is_refused_in_any_language_and_debian_naming(tmp_path, spec):
    md = tmp_path / "RESERVED-SOURCES.md"
    md.write_text(BENCHMARK_MD)
    reserved = cc.read_reserved(md)
    assert {"aiohttp", "gin", "rails", "golang-github-gin-gonic-gin", "google-gson"} <= reserved[cc.ANY_LANGUAGE]
    assert "products" not in reserved[cc.ANY_LANGUAGE] and "never" not in reserved[cc.ANY_LANGUAGE]
    sources = {"go": {"train": [cc.parse_source(spec)], "valid": [], "test": []}}
    with pytest.raises(cc.SourceError, match="reserved under benchmark repositories"):
        cc.check_not_reserved(sources, reserved)


def test_a_benchmark_repository_is_refused_through_its_debian_source_package(tmp_path):
    md = tmp_path / "RESERVED-SOURCES.md"
    md.write_text(BENCHMARK_MD)
    reserved = cc.read_reserved(md)
    sources = {"ruby": {"train": [cc.parse_source("deb:ruby-railties=2:6.1.7.10+dfsg-1~deb12u2"),
                                  cc.parse_source("deb-src:rx-java=3.1.5-1")], "valid": [], "test": []}}
    cc.check_not_reserved(sources, reserved)  # railties is not rails by name, and rx-java is not node-rx
    with pytest.raises(cc.SourceError, match="ruby-railties.*rails is reserved"):
        cc.check_not_reserved(sources, reserved, {"ruby-railties": "rails"})
    assert "gin" in cc.vendored_dirs(reserved, "python")  # a vendored copy's folder is not mined


def test_the_shipped_source_list_is_pinned_and_not_reserved():
    sources = cc.load_sources()
    assert set(sources) == set(cc.LANGUAGES)
    for splits in sources.values():
        assert all(splits[s] for s in cc.SPLITS)
    if cc.RESERVED_FILE.exists():
        cc.check_not_reserved(sources, cc.read_reserved(cc.RESERVED_FILE))


def test_a_package_in_two_splits_and_an_unpinned_source_are_errors(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[python]\ntrain = ["pypi:attrs==23.1.0"]\ntest = ["pypi:attrs==23.1.0"]\n')
    with pytest.raises(cc.SourceError, match="one split only"):
        cc.load_sources(toml)
    with pytest.raises(cc.SourceError, match="not a pinned source"):
        cc.parse_source("pypi:attrs")
    toml.write_text('[python]\ntrain = ["npm:luxon@3.7.2"]\n')  # an npm tarball mined as Python: nothing
    with pytest.raises(cc.SourceError, match=r"move it to \[javascript\]"):
        cc.load_sources(toml)


def test_packages_land_whole_in_one_split_and_copies_of_earlier_code_are_dropped(tmp_path):
    cache = tmp_path / "cache"
    toml = tmp_path / "s.toml"
    toml.write_text('[python]\ntrain = ["pypi:alpha==1.0", "pypi:beta==1.0"]\nvalid = ["pypi:gamma==1.0"]\n'
                    'test = ["pypi:delta==1.0"]\n')
    splits = cc.load_sources(toml)["python"]
    shared = _function("shared_helper", "Compute the shared helper value for x.", "y = y * 2")
    trees = {
        "alpha": {f"alpha/m{i}.py": _function(f"alpha_{i}", f"Return alpha number {i} of x.", f"y = y * {i}")
                  for i in range(12)},
        "beta": {"beta/core.py": shared + "\n" + _function("beta_one", "Return beta one of x.", "y = y - 3")},
        "gamma": {"gamma/g.py": _function("gamma_one", "Return gamma one of x.", "y = y - 4"),
                  # a vendored copy of a reserved package is not mined
                  "gamma/_vendor/thing.py": _function("vendored_one", "Return vendored one of x.", "y = y - 9"),
                  "gamma/requests/api.py": _function("get_one", "Return a reserved one of x.", "y = y - 8")},
        "delta": {"delta/d.py": shared + "\n" + _function("delta_one", "Return delta one of x.", "y = y - 5")},
    }
    for split in cc.SPLITS:
        for source in splits[split]:
            _package(cache, "python", source, trees[source.name])
    reserved = {"python": {"requests"}}

    rows = cc.build_language("python", splits, reserved, cache, tmp_path / "out")

    by_split = {split: _rows(tmp_path / "out" / "python" / f"{split}.jsonl.gz") for split in cc.SPLITS}
    assert {r["repo"] for r in by_split["train"]} == {"alpha", "beta"}
    assert {r["repo"] for r in by_split["valid"]} == {"gamma"}
    assert {r["repo"] for r in by_split["test"]} == {"delta"}
    for split, got in by_split.items():
        assert {r["partition"] for r in got} == {split}
    # all 12 files of alpha in train, though a by-file split would have scattered them
    assert sum(r["repo"] == "alpha" for r in by_split["train"]) == 12
    assert [r["func_name"] for r in by_split["valid"]] == ["gamma_one"]
    assert [r["func_name"] for r in by_split["test"]] == ["delta_one"]  # shared_helper: already in train
    assert rows == [("train", 2, 14, 0), ("valid", 1, 1, 0), ("test", 1, 1, 1)]


def test_the_codesearchnet_reader_reads_one_split_file(tmp_path):
    from structret_datasets.codesearchnet import read

    cache = tmp_path / "cache"
    toml = tmp_path / "s.toml"
    toml.write_text('[python]\ntrain = ["pypi:alpha==1.0"]\nvalid = ["pypi:gamma==1.0"]\ntest = ["pypi:delta==1.0"]\n')
    splits = cc.load_sources(toml)["python"]
    for i, split in enumerate(cc.SPLITS):
        source = splits[split][0]
        _package(cache, "python", source, {f"{source.name}/m.py": _function(
            f"{source.name}_fn", f"Return the {source.name} value of x.", f"y = y * {i + 2}")})
    cc.build_language("python", splits, {}, cache, tmp_path / "out")
    valid = tmp_path / "out" / "python" / "valid.jsonl.gz"
    assert len(read(str(valid), split="valid").queries) == 1
    assert len(read(str(valid), split="test").queries) == 0


def test_a_rerun_reuses_mined_packages_and_remines_when_the_exclusions_change(tmp_path):
    cache = tmp_path / "cache"
    toml = tmp_path / "s.toml"
    toml.write_text('[python]\ntrain = ["pypi:alpha==1.0"]\nvalid = ["pypi:gamma==1.0"]\ntest = ["pypi:delta==1.0"]\n')
    splits = cc.load_sources(toml)["python"]
    for i, split in enumerate(cc.SPLITS):
        source = splits[split][0]
        _package(cache, "python", source, {
            f"{source.name}/m.py": _function(f"{source.name}_fn", f"Return the {source.name} value of x.",
                                             f"y = y * {i + 2}"),
            f"{source.name}/requests/api.py": _function(f"{source.name}_get", "Return a copied value of x.",
                                                        f"y = y - {i + 2}")})
    out = tmp_path / "out"
    assert cc.build_language("python", splits, {}, cache, out)[0] == ("train", 1, 2, 0)
    part = cache / "mined" / "python" / "train" / f"{splits['train'][0].slug}.jsonl.gz"
    stamp = part.stat().st_mtime_ns
    assert cc.build_language("python", splits, {}, cache, out)[0] == ("train", 1, 2, 0)
    assert part.stat().st_mtime_ns == stamp  # reused, not mined again
    assert cc.build_language("python", splits, {"python": {"requests"}}, cache, out)[0] == ("train", 1, 1, 0)
    assert [r["func_name"] for r in _rows(out / "python" / "train.jsonl.gz")] == ["alpha_fn"]
