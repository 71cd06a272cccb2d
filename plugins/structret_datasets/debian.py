"""Debian's package index (deb822 ``Packages`` files) as a multi-aspect catalog.

A real catalog that every Debian or Ubuntu machine carries offline: items with a
name, a one-line synopsis, a long description and categorical aspects.

Input (the path)
----------------
* one ``Packages`` file, plain or compressed (gzip, xz, bzip2 with the standard
  library; lz4 and zstd, which apt itself writes under ``Acquire::GzipIndexes``, through
  the ``lz4``/``zstd`` command or Python module when present). The format is told by the
  file's first bytes, not its name. ``/var/lib/dpkg/status`` reads too.
* a folder, e.g. ``/var/lib/apt/lists/`` or a mirror's ``binary-amd64/``: every
  ``*_Packages`` / ``Packages`` file in it (one per stem if it is there in several
  compressions), in name order; its ``*_Translation-en`` / ``Translation-en`` files are
  used as translations unless ``translations=`` says otherwise.

Long descriptions and ``Translation-en``
----------------------------------------
Current archives (Debian since squeeze, Ubuntu) ship ``Packages`` with the synopsis
only, plus ``Description-md5``; the long description is in ``i18n/Translation-en``,
a deb822 file of ``Package``, ``Description-md5`` and ``Description-en`` keyed by that
md5 (of the full English description). A stanza whose ``Description`` has no
continuation lines takes its long description from the translation with the same
``Description-md5``. (Docker's Debian images set ``Acquire::Languages "none"``, so
``/var/lib/apt/lists`` has no Translation-en until
``apt-get update -o Acquire::Languages=en``.) dpkg's status file carries the long
descriptions inline.

The dataset
-----------
* item (``ItemRecord``) per binary package: ``id`` = ``title`` = the Package name,
  ``content`` = the long description (deb822 rules: the one leading space of each
  continuation line removed, a `` .`` line is a paragraph break -> an empty line,
  lines otherwise kept, joined with newlines; so verbatim lines keep their indent).
* ``aspects`` (every package has ``section``, ``component`` and ``priority``, ``[]`` when
  absent, plus one key per debtags facet it has):

  - ``section``: the Section without its archive-area prefix (``contrib/net`` ->
    ``net``): the area is a licence property, not a topic, and keeping it would split
    one topic into up to four values. The area goes to ``component`` (``main`` when the
    Section has no prefix, which is what Debian policy means by no prefix).
  - ``priority``: the Priority field.
  - ``Tag:`` (debtags) ``facet::value`` items, comma separated, wrapping over
    continuation lines: ``implemented-in::python, role::program`` ->
    ``{"implemented-in": ["python"], "role": ["program"]}``; a value keeps everything
    after the first ``::`` (``devel::lang:python`` -> ``devel: ["lang:python"]``); a tag
    without ``::`` goes under ``tag``. Packages without ``Tag:`` have no facet keys.
* query per package: id = the Package name, text = the synopsis (the first line of
  ``Description``); ``qrels = {pkg: {pkg: 1}}`` and ``pairs = [(pkg, pkg), ...]`` in file
  order, so the code-search protocol (one aligned document per query, full pool) applies.

What is counted (ReadStats; one row = one stanza of a Packages file)
--------------------------------------------------------------------
* skipped with ``file:line``: malformed stanzas (a line that is neither ``Field: value``
  nor a continuation, a continuation before any field, a field given twice, undecodable
  bytes, a compressed file that breaks off), a field longer than ``max_field_chars``
  characters (option; default 1,000,000), no ``Package``, no ``Description``, an
  empty synopsis, and **no long description** (not inline and not in any translation):
  ATTEMPT-style training masks the content and needs some, and a document that is just
  its name next to a query that is its synopsis says little. Malformed stanzas of
  translation files are counted as well (reason prefixed ``translation:``).
* left out: a package name already in the corpus (another version, architecture or
  suite; the first one read is kept). One exception to "first wins": if the kept copy
  has no ``Tag:`` and a later copy has, the later copy's debtags facets are added to the
  kept item. Debtags are assigned per package name, and the archive writes ``Tag:`` only
  into the main suite's Packages: in ``/var/lib/apt/lists`` the ``bookworm-security``
  file sorts first and would otherwise strip the tags of every package with a security
  update (curl, openssl, ...). With ``limit``, reading stops once that many are used.

Splits. The index has none, so structret makes a stable one from the package name
(``sha1(name)``: one package in ten is a test query, another one in ten a validation
query; the same on every machine and for every version of the index). ``test``: the test
packages' synopses as queries against the WHOLE catalog (ATTEMPT's protocol: recall@100,
recall@500, NDCG@50, MRR@100 over all items). ``valid``: the same protocol for the
validation packages, ranked against the half read only (model selection must not see the
reserved half, not even as distractors). ``train``: the other packages, each a (synopsis,
package) pair for training.
``all`` (the default): every package, every pair -- for pretraining on the catalog's
text, or a code-search style full-pool evaluation.

Reserved half. Half of the catalog is kept for evaluation by someone who never trained on it:
the packages whose ``sha1(name)`` hex digest starts with 0-7. Nothing is trained, tuned or
selected on them, so by default (``half = "open"``) every split keeps its queries, positives
and training items to the other half: ``all`` and ``train`` hold open-half packages only,
and ``test`` ranks open-half test synopses against the whole catalog (a corpus to rank against
may hold every package). ``half = "reserved"`` is the evaluation of that half (``test`` only);
``half = "both"`` reads every package (inspecting the catalog, the reader's own tests) and is
not for training, tuning or selection.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import shutil
import subprocess
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from structret.errors import DataError
from structret.records import CODE_SEARCH, MAX_FIELD_CHARS, QRELS_RANKING, Dataset, ItemRecord, Query, ReadStats

from structret_datasets._rows import BadRow, check_choice, too_long

READER = "debian-packages"
FIELD = re.compile(r"^([!-9;-~][!-9;-~]*):(.*)$")  # deb822: printable ASCII but ':' and space
SUFFIXES = ("", ".xz", ".gz", ".bz2", ".lz4", ".zst")  # preference when one index is there in several forms
FIXED = ("section", "component", "priority")  # aspect keys every package has
KEPT = {"package", "description", "description-md5", "section", "priority", "tag"}  # fields the reader uses

_MAGIC = [
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
]


class _Broken(Exception):
    """A compressed stream that breaks off or cannot be decoded."""


# --- files --------------------------------------------------------------------------------


def _index_files(folder: str, kind: str) -> list[str]:
    """``*_{kind}`` and ``{kind}`` files of a folder, one per stem (the first of SUFFIXES)."""
    stems: dict[str, str] = {}
    for name in sorted(os.listdir(folder)):
        for suffix in SUFFIXES:
            stem = name[: len(name) - len(suffix)] if suffix else name
            if name.endswith(suffix) and (stem == kind or stem.endswith("_" + kind)):
                full = os.path.join(folder, name)
                if os.path.isfile(full):
                    best = stems.get(stem)
                    if best is None or SUFFIXES.index(suffix) < SUFFIXES.index(_suffix(best)):
                        stems[stem] = full
                break
    return [stems[s] for s in sorted(stems)]


def _suffix(path: str) -> str:
    return next((s for s in SUFFIXES[1:] if path.endswith(s)), "")


def _compression(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError as exc:
        raise DataError(f"{READER}: cannot open {path} ({exc.strerror}). Check the path and its permissions.") from None
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def _module_lines(path: str, kind: str) -> Iterator[bytes] | None:
    """lz4/zstd through the Python module, or None when it is not installed."""
    import io

    try:
        if kind == "lz4":
            import lz4.frame as lz4_frame  # type: ignore[import-not-found]

            errors: tuple[type[BaseException], ...] = (RuntimeError, EOFError, OSError)
            opened = lz4_frame.open(path, "rb")
        else:
            import zstandard  # type: ignore[import-not-found]

            errors = (zstandard.ZstdError, EOFError, OSError)
            opened = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))  # noqa: SIM115 (closed with the reader)
    except ImportError:
        return None

    def lines() -> Iterator[bytes]:
        try:
            with opened as fh:
                yield from fh
        except errors as exc:
            raise _Broken(str(exc)) from None

    return lines()


def _external(path: str, kind: str) -> Iterator[bytes]:
    """lz4/zstd: the Python module if installed, else the command line tool."""
    module, tool = ("lz4.frame", "lz4") if kind == "lz4" else ("zstandard", "zstd")
    lines = _module_lines(path, kind)
    if lines is not None:
        yield from lines
        return
    exe = shutil.which(tool)
    if exe is None:
        raise DataError(
            f"{READER}: {path} is {kind}-compressed (apt stores its lists so under Acquire::GzipIndexes), "
            f"and neither the '{tool}' command nor the Python module {module} is installed. Install one "
            f"(apt-get install {tool}, or pip install {module.split('.')[0]}), or decompress the file first: "
            f"{tool} -dc {path} > Packages"
        )
    proc = subprocess.Popen([exe, "-dc", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield from proc.stdout
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stderr.close()
        if proc.wait() != 0:
            raise _Broken(err or f"{tool} exited with status {proc.returncode}")


def _lines(path: str) -> Iterator[bytes]:
    kind = _compression(path)
    openers: dict[str | None, Callable[..., Any]] = {"gzip": gzip.open, "xz": lzma.open, "bzip2": bz2.open}
    if kind in ("lz4", "zstd"):
        yield from _external(path, kind)
        return
    opener = openers.get(kind, open)
    try:
        with opener(path, "rb") as fh:
            yield from fh
    except (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, OSError, ValueError) as exc:
        raise _Broken(str(exc)) from None


# --- deb822 -------------------------------------------------------------------------------


def iter_stanzas(path: str) -> Iterator[tuple[str, dict[str, str] | None, str | None]]:
    """Yield ``(where, fields, None)`` per stanza, or ``(where, None, reason)`` for a broken one.

    ``fields`` maps lower-cased field names to the value: the first line stripped, then
    one ``\\n`` + raw continuation line (leading space kept) per continuation line.
    ``where`` is ``file:line`` of the stanza's first line, or of the offending line.
    """
    fields: dict[str, str] = {}
    # the lines of multi-line fields, joined once the stanza ends: adding each line to the
    # value as it comes would copy the value so far every time, quadratic in its size
    lines: dict[str, list[str]] = {}
    current: str | None = None
    start = 0
    bad: tuple[str, str] | None = None
    lineno = 0

    def finish():
        if bad is not None:
            return bad[0], None, bad[1]
        fields.update((name, "\n".join(parts)) for name, parts in lines.items())
        return f"{path}:{start}", fields, None

    try:
        for raw in _lines(path):
            lineno += 1
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                line = None
            if line is not None and not line.strip():
                if start:
                    yield finish()
                fields, lines, current, start, bad = {}, {}, None, 0, None
                continue
            if not start:
                start = lineno
            if bad is not None:
                continue
            if line is None:
                bad = (f"{path}:{lineno}", "undecodable bytes")
            elif line[0] in " \t":
                if current is None:
                    bad = (f"{path}:{lineno}", "continuation line before any field")
                else:
                    lines.setdefault(current, [fields[current]]).append(line)
            elif line.startswith("#"):
                continue  # a deb822 comment line
            else:
                match = FIELD.match(line)
                if match is None:
                    bad = (f"{path}:{lineno}", "malformed line (not 'Field: value')")
                elif match.group(1).lower() in fields:
                    bad = (f"{path}:{lineno}", f"field '{match.group(1)}' given twice")
                else:
                    current = match.group(1).lower()
                    fields[current] = match.group(2).strip()
    except _Broken:
        if start:
            yield (f"{path}:{start}", None, "truncated or corrupt compressed file")
        else:
            yield (f"{path}:{lineno + 1}", None, "truncated or corrupt compressed file")
        return
    if start:
        yield finish()


def long_description(value: str) -> tuple[str, str]:
    """``Description`` value -> (synopsis, long description) by deb822 rules."""
    synopsis, _, rest = value.partition("\n")
    lines = []
    for line in rest.split("\n") if rest else []:
        body = line[1:].rstrip()
        lines.append("" if body == "." else body)
    return synopsis.strip(), "\n".join(lines).strip("\n")


def parse_tags(value: str) -> dict[str, list[str]]:
    """debtags ``facet::value, ...`` (over any number of lines) -> {facet: [values]}."""
    facets: dict[str, list[str]] = {}
    for tag in value.replace("\n", " ").split(","):
        tag = tag.strip()
        if not tag:
            continue
        facet, sep, tail = tag.partition("::")
        facet, tail = (facet.strip(), tail.strip()) if sep else ("tag", tag)
        values = facets.setdefault(facet, [])
        if tail and tail not in values:
            values.append(tail)
    return facets


def _aspects(fields: dict[str, str]) -> dict[str, list[str]]:
    section = fields.get("section", "").strip()
    component = ""
    if section:
        component, _, topic = section.rpartition("/")
        component, section = component or "main", topic
    priority = fields.get("priority", "").strip()
    aspects = {
        "section": [section] if section else [],
        "component": [component] if component else [],
        "priority": [priority] if priority else [],
    }
    for facet, values in parse_tags(fields.get("tag", "")).items():
        aspects.setdefault(facet, [])
        aspects[facet] += [v for v in values if v not in aspects[facet]]
    return aspects


# --- the reader ---------------------------------------------------------------------------


def _translation_files(option, path: str) -> list[str]:
    if option is None:
        return _index_files(path, "Translation-en") if os.path.isdir(path) else []
    if not isinstance(option, str) or not option.strip():
        raise DataError(f"{READER}: option translations needs a path: a Translation-en file or a folder of "
                        f"them, or 'none' to read none.")
    if option.lower() == "none":
        return []
    if os.path.isdir(option):
        found = _index_files(option, "Translation-en")
        if not found:
            raise DataError(f"{READER}: the translations folder {option} has no Translation-en files "
                            f"(files named Translation-en or *_Translation-en, optionally compressed).")
        return found
    if os.path.isfile(option):
        return [option]
    raise DataError(f"{READER}: the translations path {option} does not exist. Pass a Translation-en file "
                    f"or a folder holding them (e.g. /var/lib/apt/lists).")


def _too_long(fields: dict[str, str], limit: int) -> BadRow | None:
    """The skip of a stanza with a field over ``limit`` characters (named as deb822 writes it), or None."""
    name = next((k for k, v in fields.items() if len(v) > limit), None)
    return None if name is None else too_long(name.capitalize(), len(fields[name]), limit)


def _read_translations(files: list[str], wanted: set[str], stats: ReadStats, max_chars: int) -> dict[str, str]:
    """Description-md5 -> long description, for the md5s in ``wanted``."""
    found: dict[str, str] = {}
    for file in files:
        for where, fields, reason in iter_stanzas(file):
            if fields is None:
                stats.skip(where, f"translation: {reason}")
                continue
            md5 = fields.get("description-md5", "").strip()
            if md5 not in wanted or md5 in found:
                continue
            text = next((v for k, v in fields.items() if k == "description-en"), None)
            if text is None:
                text = next((v for k, v in fields.items() if k.startswith("description-")), None)
            if text is None:
                stats.skip(where, "translation: no Description-en")
                continue
            bad = _too_long(fields, max_chars)
            if bad:
                stats.skip(where, f"translation: {bad.reason}", bad.detail)
                continue
            _, long = long_description(text)
            if long:
                found[md5] = long
    return found


TEST_EVERY = 10  # one package in ten is a test query
# ATTEMPT's Table 1 measures, plus MRR@100 (rank of the synopsis's own package)
METRICS = ["R@100", "R@500", "nDCG@50", "MRR@100"]


def is_test(name: str) -> bool:
    """The stable split: a package is a test query when sha1(name) falls in the first tenth."""
    import hashlib

    return int.from_bytes(hashlib.sha1(name.encode("utf-8")).digest()[:8], "big") % TEST_EVERY == 0


def is_valid(name: str) -> bool:
    """The validation packages: as many as the test ones, disjoint from them."""
    import hashlib

    return int.from_bytes(hashlib.sha1(name.encode("utf-8")).digest()[:8], "big") % TEST_EVERY == 1


def is_reserved(name: str) -> bool:
    """The half kept for evaluation: sha1(name) in hex starts with 0-7."""
    import hashlib

    return hashlib.sha1(name.encode("utf-8")).hexdigest()[0] in "01234567"


def read(path: str, *, split: str | None = None, translations: str | None = None, limit: int | None = None,
         max_field_chars: int = MAX_FIELD_CHARS, half: str = "open") -> Dataset:
    """The catalog, one ``split`` of it (all, train, valid or test), from one ``half`` (open,
    reserved, both; see the module docs). Options: structret_datasets.options.DebianPackages."""
    split = check_choice(READER, "split", split or "all", ("all", "test", "train", "valid"))
    half = check_choice(READER, "half", half, ("open", "reserved", "both"))
    if half == "reserved" and split != "test":
        raise DataError(f"{READER}: half=reserved is kept for evaluation, so only split=test reads it; train, "
                        f"tune and select on half=open (the default).")
    corpus, queries, pairs, stats = _read_catalog(path, translations, limit, max_field_chars)
    if half != "both":
        other = {name for name in corpus if is_reserved(name) != (half == "reserved")}
        if split != "test":  # the items themselves are trained on: the other half is not read at all
            stats.leave_out(f"package of the {'reserved' if half == 'open' else 'open'} half", len(other))
            stats.used -= len(other)
            corpus = {n: r for n, r in corpus.items() if n not in other}
            pairs = [(q, d) for q, d in pairs if d in corpus]
        queries = {n: q for n, q in queries.items() if n not in other}
    # all and train are (synopsis, package) pairs, evaluated as code search is; test ranks
    # the whole catalog against its qrels with ATTEMPT's measures
    if split == "all":
        return Dataset(name=READER, corpus=corpus, queries=queries, qrels={n: {n: 1} for n in corpus},
                       stats=stats, pairs=pairs, task=CODE_SEARCH)
    if split == "valid":  # against the half read only (above): selection never sees the reserved half
        asked = {n for n in corpus if is_valid(n) and n in queries}
        return Dataset(name=READER, corpus=corpus, queries={n: queries[n] for n in corpus if n in asked},
                       qrels={n: {n: 1} for n in corpus if n in asked}, stats=stats, metrics=METRICS,
                       task=QRELS_RANKING)
    test = {name for name in corpus if is_test(name)}
    if split == "test":
        # every package stays in the corpus (all used): the test queries (of the half read) rank
        # the whole catalog
        asked = {n for n in test if n in queries}
        return Dataset(name=READER, corpus=corpus, queries={n: queries[n] for n in corpus if n in asked},
                       qrels={n: {n: 1} for n in corpus if n in asked}, stats=stats, metrics=METRICS,
                       task=QRELS_RANKING)
    valid = {name for name in corpus if is_valid(name)}
    for reason, names in (("test-split package", test), ("valid-split package", valid)):
        if names:
            stats.leave_out(reason, len(names))
        stats.used -= len(names)
    kept = {n: r for n, r in corpus.items() if n not in test and n not in valid}
    return Dataset(name=READER, corpus=kept, queries={n: queries[n] for n in kept},
                   qrels={n: {n: 1} for n in kept}, stats=stats, pairs=[(q, d) for q, d in pairs if q in kept],
                   task=CODE_SEARCH)


def _read_catalog(path: str, translations_option: str | None, limit: int | None,
                  max_chars: int) -> tuple[dict, dict, list, ReadStats]:
    if os.path.isdir(path):
        files = _index_files(path, "Packages")
        if not files:
            raise DataError(
                f"{READER}: the folder {path} has no Packages files (named Packages or *_Packages, optionally "
                f".gz/.xz/.bz2/.lz4/.zst). On Debian or Ubuntu, run 'apt-get update' and pass /var/lib/apt/lists."
            )
    elif os.path.isfile(path):
        files = [path]
    else:
        raise DataError(f"{READER}: {path} does not exist. Pass a Packages file (or Packages.xz/.gz), "
                        f"a folder such as /var/lib/apt/lists, or /var/lib/dpkg/status.")
    translations = _translation_files(translations_option, path)

    stats = ReadStats(source=f"{READER} {path}")
    # Pass 1: every stanza, in file order; the long descriptions they lack come from the
    # translations in pass 2, and counting happens in pass 3 so `limit` stops cleanly.
    stanzas = [
        (where, {k: v for k, v in fields.items() if k in KEPT} if fields is not None else None, reason)
        for file in files
        for where, fields, reason in iter_stanzas(file)
    ]
    wanted = {
        fields.get("description-md5", "").strip()
        for _, fields, _ in stanzas
        if fields is not None and "\n" not in fields.get("description", "")
    } - {""}
    translated = _read_translations(translations, wanted, stats, max_chars) if wanted and translations else {}

    corpus: dict[str, ItemRecord] = {}
    queries: dict[str, Query] = {}
    pairs: list[tuple[str, str]] = []
    md5_only = 0
    tagless: set[str] = set()  # kept packages without Tag:, which a later copy may supply
    for where, fields, reason in stanzas:
        if limit is not None and stats.used >= limit:
            break
        if fields is None:
            assert reason is not None  # iter_stanzas gives every broken stanza a reason
            stats.skip(where, reason)
            continue
        bad = _too_long(fields, max_chars)
        if bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        name = fields.get("package", "").strip()
        if not name:
            stats.skip(where, "missing field 'Package'")
            continue
        if name in corpus:
            stats.leave_out("duplicate package (the first one read is kept)")
            if name in tagless and fields.get("tag", "").strip():
                # debtags belong to the package name, and the archive writes Tag: only into the
                # main suite's Packages (bookworm-security has none): lend them to the kept copy
                tagless.discard(name)
                for facet, values in _aspects({"tag": fields["tag"]}).items():
                    if facet not in FIXED:
                        corpus[name].aspects.setdefault(facet, []).extend(values)
            continue
        if "description" not in fields:
            stats.skip(where, "missing field 'Description'")
            continue
        synopsis, content = long_description(fields["description"])
        if not synopsis:
            stats.skip(where, "empty synopsis")
            continue
        if not content:
            md5 = fields.get("description-md5", "").strip()
            content = translated.get(md5, "")
            if not content:
                md5_only += bool(md5)
                stats.skip(where, "no long description")
                continue
        stats.use()
        if not fields.get("tag", "").strip():
            tagless.add(name)
        corpus[name] = ItemRecord(id=name, title=name, content=content, aspects=_aspects(fields))
        queries[name] = Query(id=name, text=synopsis)
        pairs.append((name, name))

    if not corpus and md5_only:
        raise DataError(
            f"{READER}: the Packages files under {path} carry only synopses (with Description-md5); the long "
            f"descriptions are in Translation-en files, and {'none were found' if not translations else 'those read did not match'}. "
            f"Pass translations=PATH (a Translation-en file or folder), or for apt lists run "
            f"'apt-get update -o Acquire::Languages=en' first (Docker images set Acquire::Languages \"none\")."
        )
    return corpus, queries, pairs, stats
