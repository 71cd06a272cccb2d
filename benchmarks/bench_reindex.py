"""Re-indexing a project costs what changed (issue 39): ``structret index SOURCE`` run again.

Projects of growing size, cut from the installed Python standard library (the first 1/8, 1/4, 1/2
and all of its ``.py`` files, copied to a scratch folder), each indexed once; then, timed as a user
runs them (the ``structret`` command, a new process each time, median of ``--rounds``):

- **unchanged**: the same command again, nothing edited;
- **one file edited**: a function appended to one file, then the command (the edited file's functions
  encoded by the model's ONNX copy, the lexical side updated from its term counts);
- **edited, model opened**: the same with the ONNX copy moved away, so the model is opened in torch to
  encode them (what every re-run after an edit did before the copy);
- **refresh, model loaded**: the same edit, then ``structret mcp``'s refresh (``ProjectTools.refresh``
  in this process, the model already open, as a running server has it);
- **rebuild (peer)**: what a re-run did before issue 39, measured the same way: the index's file
  manifest removed, so every file is mined again and the index built anew (vectors from the cache).

Run it first with ``--warm`` on a busy machine if you like (it fills the vector cache, which takes
minutes), then without it on a quiet one. ::

    python benchmarks/bench_reindex.py --warm
    python benchmarks/bench_reindex.py --rounds 3
    python benchmarks/bench_reindex.py --shares 0.125 --index milvus   # the same on Milvus Lite
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

SHARES = (0.125, 0.25, 0.5, 1.0)
EDIT = "\n\ndef bench_reindex_added_{n}(values):\n    \"\"\"Sum the values twice.\"\"\"\n    return 2 * sum(values)\n"


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts
                  and "tests" not in p.parts and "idlelib" not in p.parts)


def project(files: list[Path], share: float, root: Path) -> Path:
    """The first ``share`` of the files, copied under ``root`` with their relative paths."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    folder = root / f"project-{share:g}"
    if folder.is_dir():
        shutil.rmtree(folder)
    for file in files[:max(1, int(len(files) * share))]:
        target = folder / file.relative_to(stdlib)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
    return folder


def structret(*args: str) -> tuple[float, str]:
    exe = Path(sys.executable).with_name("structret")
    started = time.perf_counter()
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"structret {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm", action="store_true", help="only build each project's index once (fills the cache)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "bench-reindex"))
    parser.add_argument("--shares", type=float, nargs="*", default=list(SHARES))
    parser.add_argument("--index", default=None, help="the index kind (structret index --index; default: its own)")
    args = parser.parse_args()
    kind = ["--index", args.index] if args.index else []
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    files = stdlib_files()
    rows = []
    for share in args.shares:
        folder = project(files, share, work)
        out = work / f"idx-{share:g}"
        shutil.rmtree(out, ignore_errors=True)
        built, said = structret("index", str(folder), "--out", str(out), *kind)
        print(f"[{share:g}] first build {built:.1f} s: {said}", flush=True)
        if args.warm:
            continue
        unchanged = [structret("index", str(folder), "--out", str(out), *kind)[0] for _ in range(args.rounds)]
        edited, opened, refresh, rebuild = [], [], [], []
        target = next(f for f in sorted(folder.rglob("*.py")) if f.stat().st_size > 2000)
        for n in range(args.rounds):
            with target.open("a", encoding="utf-8") as f:
                f.write(EDIT.format(n=n))
            seconds, said = structret("index", str(folder), "--out", str(out), *kind)
            assert "1 of " in said and "files mined" in said, said
            edited.append(seconds)
        # the ONNX copy moved away for these rounds: the re-run finds none and opens the model
        copy = Path(json.loads((out / "source-files.json").read_text(encoding="utf-8"))["encoder"]["onnx"])
        copy.rename(copy.with_name(copy.name + ".away"))
        try:
            for n in range(args.rounds):
                with target.open("a", encoding="utf-8") as f:
                    f.write(EDIT.format(n=50 + n))
                seconds, said = structret("index", str(folder), "--out", str(out), *kind)
                assert "1 of " in said and "files mined" in said, said
                opened.append(seconds)
        finally:
            copy.with_name(copy.name + ".away").rename(copy)
        from structret.api.mcp import ProjectTools

        tools = ProjectTools(out)
        tools.search("warm up", 1)  # the server's model is open before any refresh, as a running one's is
        for n in range(args.rounds):
            with target.open("a", encoding="utf-8") as f:
                f.write(EDIT.format(n=100 + n))
            started = time.perf_counter()
            done = tools.refresh()
            refresh.append(time.perf_counter() - started)
            assert done["files_mined"] == 1, done
        for _ in range(args.rounds):
            (out / "source-files.json").unlink()
            seconds, said = structret("index", str(folder), "--out", str(out), *kind)
            assert "built from all" in said, said
            rebuild.append(seconds)
        functions = int(said.split("indexed ", 1)[1].split()[0])
        count = sum(1 for _ in folder.rglob("*.py"))
        rows.append((functions, count, *(statistics.median(t) for t in (unchanged, edited, opened, refresh, rebuild))))
        print(f"[{share:g}] {rows[-1]}", flush=True)
    if args.warm:
        return
    print(f"\n`structret index SOURCE` run again, 2 torch threads, medians of {args.rounds} (seconds)")
    print(f"{'functions':>9} {'files':>6} {'unchanged':>10} {'1 file edited':>14} {'edited, model opened':>21} "
          f"{'refresh, loaded':>16} {'rebuild (peer)':>15} {'rebuild / edited':>17}")
    for functions, count, unchanged_s, edited_s, opened_s, refresh_s, rebuild_s in rows:
        print(f"{functions:>9} {count:>6} {unchanged_s:>10.2f} {edited_s:>14.2f} {opened_s:>21.2f} {refresh_s:>16.2f} "
              f"{rebuild_s:>15.2f} {rebuild_s / edited_s:>16.1f}x")


if __name__ == "__main__":
    main()
