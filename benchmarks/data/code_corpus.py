"""Multi-language code search data for SDA/MEP: train, valid and test split by source package.

One command downloads the pinned sources of ``code_sources.toml`` (Debian bookworm binary and
source packages, PyPI wheels, npm tarballs), unpacks them, mines every package with
``structret.mining.mine`` (what ``structret mine`` runs) and writes, per language::

    OUT/LANG/train.jsonl.gz   OUT/LANG/valid.jsonl.gz   OUT/LANG/test.jsonl.gz

CodeSearchNet rows whose ``partition`` is the file's split, so
``--data codesearchnet:OUT/go/valid.jsonl.gz --split valid`` reads one of them. Unlike
``structret mine`` alone (which splits a tree by file path), a package here is entirely in one
split: test code comes from projects never trained on. A function whose code already appeared
in an earlier package (train first, then valid, then test) is dropped as a cross-package
duplicate, so no test function is a copy of a training one.

Sources listed in ``../shared/RESERVED-SOURCES.md`` (next to the repository) are held out for
evaluation: the script reads that file at run time and refuses any entry named there, by its
own name or its Debian source-package name; directories named after a reserved Python or
JavaScript package (a vendored copy) are not mined. ::

    python benchmarks/data/code_corpus.py --cache /work/data/code
    python benchmarks/data/code_corpus.py --cache /work/data/code --languages go,ruby

Re-running reuses what is already downloaded, unpacked and mined (under CACHE). Needs network
access to deb.debian.org (with a deb-src line for Java), PyPI and, for npm entries, the npm
registry; dpkg-deb, apt-get, pip and npm on PATH.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES_FILE = HERE / "code_sources.toml"
RESERVED_FILE = HERE.parents[2] / "shared" / "RESERVED-SOURCES.md"
LANGUAGES = ("python", "go", "java", "javascript", "php", "ruby")
SPLITS = ("train", "valid", "test")
# The reserved list's key for a benchmark's repositories, refused whatever a source's language.
ANY_LANGUAGE = "benchmark repositories"
KINDS = ("deb", "deb-src", "pypi", "npm")
# Kinds that hold one language's code: listed under another, they would be mined to nothing
KIND_LANGUAGE = {"pypi": "python", "npm": "javascript"}
# Folders of someone else's code beyond the miner's defaults (node_modules, vendor, ...).
VENDOR_DIRS = ("_vendor", "_vendored", "vendored", "third_party", "thirdparty", "third-party", "extern", "externals",
               "bower_components")
# Built bundles: a package's own code again, minified or with its dependencies inlined
# (phaser's dist/phaser.js carries eventemitter3, a reserved package).
BUNDLE_DIRS = {"javascript": ("dist", "build", "bundles", "umd")}
# Languages whose packages commonly carry a copy of another package in a folder named after it.
VENDORING_LANGUAGES = ("python", "javascript")
_PREFIXES = ("node-", "php-", "python3-", "python-", "ruby-", "libjs-")
# The standard libraries the reserved list describes in prose ("any Go release's src/", "any JDK
# src.zip", "any Ruby release's lib/"): Debian's packages of them, whatever the version.
STDLIB_PACKAGES = re.compile(r"^(golang-(\d|go$|src$|doc$)|golang$|openjdk-|libruby\d|ruby\d)")


class SourceError(Exception):
    """A source list, a reserved source or a download that cannot be used; the message says why."""


@dataclass(frozen=True)
class Source:
    """One pinned package: ``kind`` (deb, deb-src, pypi, npm), ``name`` and ``version``."""

    kind: str
    name: str
    version: str
    spec: str

    @property
    def slug(self) -> str:
        """A file-system name for the package."""
        return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{self.name}-{self.version}")


def parse_source(spec: str) -> Source:
    """``deb:NAME=VER``, ``deb-src:NAME=VER``, ``pypi:NAME==VER`` or ``npm:NAME@VER`` as a Source."""
    kind, sep, rest = spec.partition(":")
    patterns = {"deb": r"([^=\s]+)=(\S+)", "deb-src": r"([^=\s]+)=(\S+)", "pypi": r"([^=\s]+)==(\S+)",
                "npm": r"(@?[^@\s]+)@(\S+)"}
    match = re.fullmatch(patterns[kind], rest) if sep and kind in patterns else None
    if not match:
        raise SourceError(
            f"{spec!r}: not a pinned source. Write deb:NAME=VERSION, deb-src:NAME=VERSION, "
            f"pypi:NAME==VERSION or npm:NAME@VERSION."
        )
    return Source(kind, match.group(1), match.group(2), spec)


def load_sources(path: Path = SOURCES_FILE) -> dict[str, dict[str, list[Source]]]:
    """language -> split -> sources, checked: known languages and splits, no package in two places."""
    with open(path, "rb") as fh:
        table = tomllib.load(fh)
    out: dict[str, dict[str, list[Source]]] = {}
    where: dict[str, str] = {}
    for language, splits in table.items():
        if language not in LANGUAGES:
            raise SourceError(f"{path}: [{language}] is not a language; use one of {', '.join(LANGUAGES)}.")
        unknown = set(splits) - set(SPLITS)
        if unknown:
            raise SourceError(f"{path}: [{language}] has {sorted(unknown)}; the splits are {', '.join(SPLITS)}.")
        out[language] = {}
        for split in SPLITS:
            out[language][split] = []
            for spec in splits.get(split, []):
                source = parse_source(spec)
                if KIND_LANGUAGE.get(source.kind, language) != language:
                    raise SourceError(f"{path}: {spec} is listed under [{language}], but a {source.kind} source is "
                                      f"{KIND_LANGUAGE[source.kind]} code (its miner would read none of it); move it "
                                      f"to [{KIND_LANGUAGE[source.kind]}].")
                key = f"{source.kind}:{source.name}"
                if key in where:
                    raise SourceError(f"{path}: {source.name} is in {where[key]} and in {language}.{split}; "
                                      f"a package belongs to one split only.")
                where[key] = f"{language}.{split}"
                out[language][split].append(source)
    return out


def name_key(name: str) -> str:
    """A package name without registry prefix, case and separator differences (node-yaml ~ yaml)."""
    key = re.sub(r"[-_.]+", "-", name.strip().lower())
    for prefix in _PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix):]
    return key


def read_reserved(path: Path) -> dict[str, set[str]]:
    """language -> reserved package names (as ``name_key``) from RESERVED-SOURCES.md's bullets.

    A bullet is ``- LANGUAGE: name, name, ...``; an item that is prose (``the Go standard
    library (golang-1.19-src, ...)``) contributes the package-like words in it (with a digit or
    a hyphen: golang-1.19-src, openjdk-17-source, libruby3.1).
    """
    reserved: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*[-*]\s+([a-z]+):\s*(.+)$", line)
        if not match or match.group(1) not in LANGUAGES:
            continue
        names: set[str] = set()
        for item in match.group(2).split(","):
            item = item.strip()
            if re.fullmatch(r"[A-Za-z0-9@][A-Za-z0-9._+/@-]*", item):
                names.add(name_key(item))
            else:
                names.update(name_key(w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._+-]*", item)
                             if re.search(r"[-\d]", w) and re.search(r"[a-z]", w))
        reserved.setdefault(match.group(1), set()).update(names)
    repos = read_reserved_repositories(path)
    if repos:
        reserved[ANY_LANGUAGE] = repos
    return reserved


def read_reserved_repositories(path: Path) -> set[str]:
    """``name_key``s of the repositories a benchmark bullet lists as ``name (owner/repo), ...``.

    Such a bullet (semble's code-search benchmark) names projects, not packages, in any language,
    so each repository stands for the names its packages go by: its own name and the repo's
    (``rails``, ``commons-lang``), ``owner-repo`` (Debian's ``google-gson``) and Debian's Go
    package ``golang-github-owner-repo`` (``-dev`` is dropped by ``package_keys``).
    """
    keys: set[str] = set()
    text = path.read_text(encoding="utf-8")
    for block in re.findall(r"^\s*[-*]\s+[^:\n]*benchmark[^:\n]*(?:\([^)]*\))?:\s*(.*?)(?=^\s*[-*]\s|\Z)", text,
                            re.M | re.S):
        for name, owner, repo in re.findall(r"([A-Za-z0-9][\w.+-]*)\s*\(([\w.-]+)/([\w.-]+)\)", block):
            for item in (name, repo, f"{owner}-{repo}", f"golang-github-{owner}-{repo}"):
                keys.add(name_key(item))
    return keys


def package_keys(name: str) -> set[str]:
    """The names a package may be reserved under: its ``name_key``, and that without Debian's
    ``golang-...-dev``/``lib...-java`` wrapping or a trailing major version (commons-lang3, minio-go-v7)."""
    key = name_key(name)
    keys = {key}
    bare = re.sub(r"^(golang-.+)-dev$", r"\1", key)
    bare = re.sub(r"^lib(.+)-java$", r"\1", bare)  # not rx-java: RxJava's own name
    keys.update({bare, re.sub(r"(-v?\d+)$", "", bare), re.sub(r"(?<=[a-z])\d+$", "", bare)})
    return {k for k in keys if k}


def check_not_reserved(sources: dict[str, dict[str, list[Source]]], reserved: dict[str, set[str]],
                       origins: dict[str, str] | None = None) -> None:
    """Raise SourceError naming every source that is reserved (in any language's list).

    ``origins`` maps a Debian binary package to its source package, checked as well: a
    binary built from a reserved source (php-illuminate-* from php-laravel-framework) is that source.
    """
    every = {key: lang for lang, keys in reserved.items() for key in keys}
    bad = []
    for language, splits in sources.items():
        for split, items in splits.items():
            for source in items:
                names = [source.name] + ([origins[source.name]] if origins and source.name in origins else [])
                for name in names:
                    if STDLIB_PACKAGES.match(name.lower()):
                        bad.append(f"{language}.{split}: {source.spec} ({name} is a standard library, reserved)")
                    elif package_keys(name) & every.keys():
                        hit = sorted(package_keys(name) & every.keys())[0]
                        bad.append(f"{language}.{split}: {source.spec} ({name} is reserved under "
                                   f"{every[hit]})")
    if bad:
        raise SourceError("reserved sources in the source list, never to be trained, tuned or selected on:\n  "
                          + "\n  ".join(bad) + "\nRemove them from " + str(SOURCES_FILE.name) + ".")


def vendored_dirs(reserved: dict[str, set[str]], language: str) -> tuple[str, ...]:
    """Folder names not to mine in ``language``: vendor folders, and reserved packages' own names."""
    names = set(VENDOR_DIRS) | set(BUNDLE_DIRS.get(language, ()))
    if language in VENDORING_LANGUAGES:
        for key in set(reserved.get(language, ())) | set(reserved.get(ANY_LANGUAGE, ())):
            names.update({key, key.replace("-", "_"), key.removeprefix("python-").replace("-", "_")})
        if language == "python":
            names.add("dateutil")  # python-dateutil's import name
    return tuple(sorted(names))


# --- fetching and unpacking -------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise SourceError(f"{cmd[0]}: not found. Install it (apt-get install dpkg apt npm) or leave out the "
                          f"languages whose sources need it (--languages).") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SourceError(f"{' '.join(cmd)} failed (exit {done.returncode}) in {cwd}: " + " | ".join(tail))
    return done


def debian_origin(name: str, version: str) -> str:
    """The source package a Debian binary package is built from (its own name if none is given)."""
    try:
        done = _run(["apt-cache", "show", f"{name}={version}"])
    except SourceError as exc:
        raise SourceError(f"{exc}\n{name}={version} is not in the apt index. Run apt-get update, or pin the "
                          f"version apt-cache policy {name} offers.") from exc
    if not done.stdout.strip():
        raise SourceError(f"apt-cache show {name}={version}: not in the apt index. Run apt-get update, or pin the "
                          f"version apt-cache policy {name} offers.")
    match = re.search(r"^Source:\s*(\S+)", done.stdout, re.M)
    return match.group(1) if match else name


def _fetch_upstream_tarballs(source: Source, folder: Path) -> None:
    """The upstream tarballs (*.orig*.tar.*) of a Debian source package, hash-checked.

    Only those: the code is upstream's, and Debian's packaging (debian.tar.*) adds none of it.
    """
    import urllib.request

    hint = "Is there a deb-src line for bookworm in /etc/apt/sources.list.d/ (then apt-get update)?"
    try:
        done = _run(["apt-get", "source", "--print-uris", f"{source.name}={source.version}"])
    except SourceError as exc:
        raise SourceError(f"{exc}\n{hint}") from exc
    found = re.findall(r"^'(\S+)' (\S+\.orig\S*\.tar\.\w+) \d+ SHA256:([0-9a-f]{64})$", done.stdout, re.M)
    if not found:
        raise SourceError(f"apt-get source --print-uris {source.name}={source.version}: no upstream tarball. {hint}")
    for uri, filename, sha256 in found:
        try:
            with urllib.request.urlopen(uri, timeout=120) as response:
                data = response.read()
        except OSError as exc:  # URLError, HTTPError, timeouts
            raise SourceError(f"{source.spec}: {uri}: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            raise SourceError(f"{uri}: SHA256 differs from the apt index's; not used.")
        (folder / filename).write_bytes(data)


def fetch(source: Source, downloads: Path) -> Path:
    """Download ``source`` once into its own folder under ``downloads``; the folder."""
    folder = downloads / source.kind / source.slug
    if (folder / ".done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if source.kind == "deb":
        _run(["apt-get", "download", f"{source.name}={source.version}"], folder)
    elif source.kind == "deb-src":
        _fetch_upstream_tarballs(source, folder)
    elif source.kind == "pypi":
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
              "--implementation", "cp", "--platform", "manylinux2014_x86_64", "--platform", "any",
              "--disable-pip-version-check", "-q", "-d", ".", f"{source.name}=={source.version}"], folder)
    elif source.kind == "npm":
        _run(["npm", "pack", "--silent", f"{source.name}@{source.version}"], folder)
    (folder / ".done").write_text(source.spec + "\n")
    return folder


def unpack(source: Source, folder: Path, dest: Path) -> Path:
    """Unpack the downloaded ``source`` into ``dest`` once; ``dest``."""
    if (dest / ".done").exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    patterns = {"deb": "*.deb", "deb-src": "*.orig*.tar.*", "pypi": "*.whl", "npm": "*.tgz"}
    files = sorted(p for p in folder.glob(patterns[source.kind]) if not p.name.endswith(".asc"))
    if not files:
        raise SourceError(f"{source.spec}: no {patterns[source.kind]} in {folder}; delete the folder and re-run.")
    for file in files:  # a source package may have component tarballs (orig-NAME.tar.*) besides the main one
        if source.kind == "deb":
            _run(["dpkg-deb", "-x", str(file), str(dest)], folder)
        elif source.kind == "pypi":
            with zipfile.ZipFile(file) as zf:
                zf.extractall(dest)
        else:
            with tarfile.open(file) as tf:
                tf.extractall(dest, filter="data")
    (dest / ".done").write_text(source.spec + "\n")
    return dest


# --- mining and merging -----------------------------------------------------------------------


@dataclass
class PackageResult:
    """What mining one package gave (the miner's report, in numbers)."""

    files_seen: int = 0
    files_skipped: dict = field(default_factory=dict)
    functions_found: int = 0
    kept: int = 0
    dropped: dict = field(default_factory=dict)


def mine_package(source: Source, language: str, split: str, tree: Path, out: Path,
                 exclude: tuple[str, ...], structure_pairs: bool = False) -> PackageResult:
    """Mine ``tree`` into ``out`` with every row in ``split``; reuse ``out`` if already mined."""
    from structret.mining import DEFAULT_EXCLUDE, mine

    sidecar = out.with_name(out.name + ".report.json")
    if out.exists() and sidecar.exists():
        saved = json.loads(sidecar.read_text())
        if saved.pop("exclude", None) == list(exclude):  # mined with other exclusions: mine again
            return PackageResult(**saved)
    out.parent.mkdir(parents=True, exist_ok=True)
    shares = tuple(1.0 if s == split else 0.0 for s in SPLITS)  # the whole package in one split
    report = mine(tree, language, out, repo=source.name, splits=shares,
                  exclude=tuple(DEFAULT_EXCLUDE) + exclude, show_progress=False, structure_pairs=structure_pairs)
    result = PackageResult(report.files_seen, dict(report.files_skipped), report.functions_found, report.kept,
                           dict(report.dropped))
    sidecar.write_text(json.dumps({**result.__dict__, "exclude": list(exclude)}))
    return result


def _part_rows(part: Path, cap: int | None) -> list[str]:
    """The lines of one mined package; at most ``cap`` of them, chosen by the sha1 of each row's url
    (so the choice is the same on every machine and run)."""
    with gzip.open(part, "rt", encoding="utf-8") as fh:
        lines = fh.readlines()
    if cap is not None and len(lines) > cap:
        lines = sorted(lines, key=lambda line: hashlib.sha1(_row_key(line).encode("utf-8")).hexdigest())[:cap]
    return lines


def merge_split(parts: list[Path], out: Path, split: str, seen: set[bytes],
                package_cap: int | None = None) -> tuple[int, int]:
    """Concatenate mined ``parts`` into ``out`` (rows' partition = ``split``), dropping code in ``seen``.

    ``package_cap`` keeps at most that many rows of one package, so that a few large packages
    (generated API clients, say) do not make up most of the split. Returns (rows written,
    cross-package duplicates dropped); ``seen`` grows by what was written.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = dups = 0
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as sink:
        for part in parts:
            for line in _part_rows(part, package_cap):
                row = json.loads(line)
                if row.get("partition") != split:
                    raise SourceError(f"{part}: a row in partition {row.get('partition')!r}, expected {split!r}; "
                                      f"delete it and re-run.")
                key = hashlib.sha1(row["code"].encode("utf-8")).digest()
                if key in seen:
                    dups += 1
                    continue
                seen.add(key)
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                kept += 1
    os.replace(tmp, out)
    return kept, dups


def stdlib_code(language: str, cache: Path) -> set[bytes]:
    """sha1s of the code of every function of the running Python's standard library (for
    ``python``; empty otherwise): the README's main job scores on the standard library, so a
    package's copy of a standard-library function (a backport, a patched copy) is not trained on."""
    if language != "python":
        return set()
    import sysconfig

    from structret.mining import DEFAULT_EXCLUDE, mine

    part = cache / "mined" / "python" / "stdlib.jsonl.gz"
    if not part.exists():
        part.parent.mkdir(parents=True, exist_ok=True)
        tmp = part.with_name("stdlib.tmp.jsonl.gz")
        mine(Path(sysconfig.get_paths()["stdlib"]), "python", tmp, repo="stdlib", splits=(1.0, 0.0, 0.0),
             exclude=tuple(DEFAULT_EXCLUDE) + ("site-packages",), show_progress=False, structure_pairs=True)
        os.replace(tmp, part)
    with gzip.open(part, "rt", encoding="utf-8") as fh:
        return {hashlib.sha1(json.loads(line)["code"].encode("utf-8")).digest() for line in fh}


def build_language(language: str, splits: dict[str, list[Source]], reserved: dict[str, set[str]], cache: Path,
                   out_dir: Path, package_cap: int | None = None,
                   held_out: set[bytes] | None = None) -> list[tuple[str, int, int, int]]:
    """Fetch, unpack, mine and merge one language; rows (split, packages, kept, cross-package dups).

    ``package_cap`` bounds one train package's rows (``merge_split``); code in ``held_out`` (the
    standard library's, for Python) is in no split."""
    exclude = vendored_dirs(reserved, language)
    total = PackageResult()
    skipped: Counter = Counter()
    dropped: Counter = Counter()
    mined: dict[str, list[Path]] = {s: [] for s in SPLITS}
    for split in SPLITS:
        for source in splits[split]:
            folder = fetch(source, cache / "downloads")
            tree = unpack(source, folder, cache / "src" / language / source.slug)
            part = cache / "mined" / language / split / f"{source.slug}.jsonl.gz"
            r = mine_package(source, language, split, tree, part, exclude)
            skip = sum(r.files_skipped.values())
            print(f"  {language} {split:5} {source.spec}: {r.files_seen} files ({skip} skipped), "
                  f"{r.functions_found} functions, {r.kept} kept", flush=True)
            mined[split].append(part)
            total.files_seen += r.files_seen
            total.functions_found += r.functions_found
            total.kept += r.kept
            skipped.update(r.files_skipped)
            dropped.update(r.dropped)
    print(f"{language}: miner report: {total.files_seen} files seen, {sum(skipped.values())} skipped"
          + (" (" + ", ".join(f"{k}: {v}" for k, v in skipped.most_common()) + ")" if skipped else "")
          + f"; {total.functions_found} functions found = {total.kept} kept + {sum(dropped.values())} dropped ("
          + ", ".join(f"{k}: {v}" for k, v in dropped.most_common()) + ")", flush=True)
    seen: set[bytes] = set(held_out or ())
    rows = []
    for split in SPLITS:
        kept, dups = merge_split(mined[split], out_dir / language / f"{split}.jsonl.gz", split, seen,
                                 package_cap if split == "train" else None)
        rows.append((split, len(splits[split]), kept, dups))
    return rows


def build_structure_train(language: str, splits: dict[str, list[Source]], reserved: dict[str, set[str]], cache: Path,
                          corpus_dir: Path, out_file: Path) -> Counter:
    """``out_file``: the language's train packages mined again with ``structure_pairs`` (the
    docstring rows plus rows from functions without one, ``pair_kind`` set), minus any code
    that is also in the corpus' valid or test split. Returns the rows written by kind."""
    exclude = vendored_dirs(reserved, language)
    parts = []
    for source in splits["train"]:
        folder = fetch(source, cache / "downloads")
        tree = unpack(source, folder, cache / "src" / language / source.slug)
        part = cache / "mined-structure" / language / "train" / f"{source.slug}.jsonl.gz"
        mine_package(source, language, "train", tree, part, exclude, structure_pairs=True)
        parts.append(part)
    held_out: set[bytes] = set()
    for split in ("valid", "test"):
        with gzip.open(corpus_dir / language / f"{split}.jsonl.gz", "rt", encoding="utf-8") as f:
            held_out.update(hashlib.sha1(json.loads(line)["code"].encode("utf-8")).digest() for line in f)
    merge_split(parts, out_file, "train", held_out)
    kinds: Counter = Counter()
    with gzip.open(out_file, "rt", encoding="utf-8") as f:
        for line in f:
            kinds[json.loads(line).get("pair_kind", "docstring")] += 1
    return kinds


def combine(language: str, corpus_dir: Path, out_file: Path, caps: dict[str, int | None]) -> dict[str, int]:
    """One file of a language's three splits (each row keeps its partition), valid and test cut to
    ``caps`` rows chosen by the sha1 of each function's url: the same rows on every machine, the
    languages equally weighted in a pooled evaluation, and its encoding cost bounded (the ablations)."""
    counts = {}
    tmp = out_file.with_name(out_file.name + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(tmp, "wt", encoding="utf-8") as out:
        for split in SPLITS:
            with gzip.open(corpus_dir / language / f"{split}.jsonl.gz", "rt", encoding="utf-8") as f:
                rows = [line for line in f if line.strip()]
            if caps.get(split):
                rows = sorted(rows, key=lambda line: hashlib.sha1(_row_key(line).encode("utf-8")).hexdigest())
                rows = rows[:caps[split]]
            counts[split] = len(rows)
            out.writelines(rows)
    os.replace(tmp, out_file)
    return counts


def _row_key(line: str) -> str:
    row = json.loads(line)
    return row.get("url") or f"{row['repo']}/{row['path']}:{row['func_name']}"


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=os.environ.get("STRUCTRET_CODE_DATA", "code-data"),
                        help="Downloads, unpacked sources and mined packages (default: $STRUCTRET_CODE_DATA or ./code-data).")
    parser.add_argument("--out", help="Where LANG/{train,valid,test}.jsonl.gz go (default: CACHE/corpus).")
    parser.add_argument("--languages", default=",".join(LANGUAGES), help="Comma-separated subset of languages.")
    parser.add_argument("--sources", default=str(SOURCES_FILE), help="The pinned source list (TOML).")
    parser.add_argument("--reserved", default=str(RESERVED_FILE), help="RESERVED-SOURCES.md to refuse sources from.")
    parser.add_argument("--combined", metavar="DIR",
                        help="Also write DIR/LANG.jsonl.gz: every train row, valid and test cut to --valid-cap and "
                             "--test-cap rows (chosen by url hash); what the santa-ablation runs read.")
    parser.add_argument("--structure-pairs", metavar="DIR",
                        help="Also write DIR/LANG.jsonl.gz: the train packages mined again with --structure-pairs "
                             "(docstring rows + rows from undocumented functions), no code of valid or test.")
    parser.add_argument("--package-cap", type=int, default=3000,
                        help="At most this many train rows from one package, chosen by url hash (default 3000).")
    parser.add_argument("--valid-cap", type=int, default=300)
    parser.add_argument("--test-cap", type=int, default=500)
    args = parser.parse_args(argv)
    try:
        sources = load_sources(Path(args.sources))
        languages = [s.strip() for s in args.languages.split(",") if s.strip()]
        missing = [lang for lang in languages if lang not in sources]
        if missing:
            raise SourceError(f"no sources for {', '.join(missing)} in {args.sources}; it has {', '.join(sources)}.")
        sources = {lang: sources[lang] for lang in languages}
        reserved_path = Path(args.reserved)
        if reserved_path.exists():
            reserved = read_reserved(reserved_path)
            print(f"reserved sources: {sum(map(len, reserved.values()))} names read from {reserved_path}", flush=True)
        else:
            reserved = {}
            print(f"reserved sources: {reserved_path} not found, nothing refused by name", flush=True)
        check_not_reserved(sources, reserved)
        origins = {s.name: debian_origin(s.name, s.version) for splits in sources.values()
                   for items in splits.values() for s in items if s.kind == "deb"}
        check_not_reserved(sources, reserved, origins)
        print(f"sources: {sum(len(v) for sp in sources.values() for v in sp.values())} packages, none reserved "
              f"(names and Debian source packages checked)", flush=True)
        cache = Path(args.cache).expanduser().resolve()
        out_dir = Path(args.out).expanduser().resolve() if args.out else cache / "corpus"
        table = {}
        for language in languages:
            print(f"== {language}: fetch, unpack, mine ({sum(len(v) for v in sources[language].values())} packages)",
                  flush=True)
            try:
                held_out = stdlib_code(language, cache)
                if held_out:
                    print(f"{language}: {len(held_out)} standard-library functions, in no split", flush=True)
                table[language] = build_language(language, sources[language], reserved, cache, out_dir,
                                                 args.package_cap, held_out)
            except SourceError as exc:  # one language's sources out of reach does not stop the others
                print(f"{language}: FAILED: {exc}", flush=True)
                table[language] = None
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"\n{'language':<11} {'split':<6} {'packages':>8} {'kept':>7} {'x-dups':>7}  file")
    for language, rows in table.items():
        if rows is None:
            print(f"{language:<11} failed (see above)")
            continue
        for split, packages, kept, dups in rows:
            print(f"{language:<11} {split:<6} {packages:>8} {kept:>7} {dups:>7}  {out_dir / language / f'{split}.jsonl.gz'}")
    if args.structure_pairs:
        for language, rows in table.items():
            if rows is not None:
                kinds = build_structure_train(language, sources[language], reserved, cache, out_dir,
                                              Path(args.structure_pairs) / f"{language}.jsonl.gz")
                print(f"structure pairs {language}: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if args.combined:
        caps = {"train": None, "valid": args.valid_cap, "test": args.test_cap}
        for language, rows in table.items():
            if rows is not None:
                counts = combine(language, out_dir, Path(args.combined) / f"{language}.jsonl.gz", caps)
                print(f"combined {language}: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
                      file=sys.stderr)
    return 1 if any(rows is None for rows in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
