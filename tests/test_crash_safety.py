"""Real processes killed with SIGKILL: mid-training, mid-checkpoint, mid-index-save.

An exception unwinds through ``finally`` and ``except`` blocks; SIGKILL does not, so only
a killed process shows what a power cut or the OOM killer leaves on disk. Each test starts
a child process and kills it (or lets it kill itself at a chosen line), then checks what
the next run finds.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from _tiny_models import _WORDS, tiny_bert_dir, one_torch_thread  # noqa: F401  (fixtures)

from structret.artifacts import atomic_dir, verify_checksums, write_meta
from structret.search.saved import load_index
from structret.training import checkpoints

TOTAL, EVERY = 24, 4
# the step to kill at is drawn from a seeded RNG, so a failure can be replayed;
# STRUCTRET_KILL_SEED=N kills at another step
KILL_SEED = int(os.environ.get("STRUCTRET_KILL_SEED", "20261122"))

# one thread in every child: the same float sums in the same order, so weights compare bit for bit
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
             "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def csn_data(tmp_path_factory) -> str:
    """40 CodeSearchNet rows (python functions with docstrings)."""
    path = tmp_path_factory.mktemp("csn") / "train.jsonl.gz"
    rng = random.Random(0)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(40):
            a, b, name = (rng.choice(_WORDS) for _ in range(3))
            doc = [rng.choice(_WORDS) for _ in range(rng.randint(3, 9))]
            f.write(json.dumps({"repo": "tiny/repo", "path": f"m{i}.py", "func_name": f"{name}_{i}",
                                "language": "python", "code": f"def {name}_{i}({a}, {b}):\n    return {a} + {b}\n",
                                "docstring_tokens": doc, "docstring": " ".join(doc), "partition": "train",
                                "url": f"https://x/{i}"}) + "\n")
    return f"codesearchnet:{path}"


def _settings(**changes) -> dict[str, str]:
    # sda+mep on a BERT with dropout: data order, masking and dropout all draw random numbers
    values = {"batch_size": 4, "lr": 1e-3, "query_max_len": 16, "passage_max_len": 32, "label_max_len": 16,
              "log_every": 1, "seed": 7, "max_steps": TOTAL, "checkpoint_every": EVERY, "keep_checkpoints": 0,
              **changes}
    return {k: str(v) for k, v in values.items()}


def _train_args(run: Path, model: Path, data: str, **changes) -> list[str]:
    return ["train", "--backbone", "hf-encoder", "--model", str(model), "--data", data, "--objective", "sda+mep",
            "--out", str(run), *[a for k, v in _settings(**changes).items() for a in ("--set", f"{k}={v}")]]


def _train_here(run: Path, model: Path, data: str) -> Path:
    """What ``structret train`` with _train_args does, in this process (one torch thread, as the children)."""
    from structret.recipes import resolve_recipe
    from structret.training import train

    return train(resolve_recipe(None, {"backbone": "hf-encoder", "model": str(model), "data": data,
                                       "objective": "sda+mep", "output": str(run), **_settings()}))


def _structret(*args: str, stderr: Path) -> subprocess.Popen:
    with stderr.open("w") as err:  # a file, not a pipe: tqdm's output must never block the child
        return subprocess.Popen([sys.executable, "-m", "structret.cli", *args], env=CHILD_ENV,
                                stdout=subprocess.DEVNULL, stderr=err)


def _finish(process: subprocess.Popen, stderr: Path, timeout: float = 120) -> str:
    process.wait(timeout=timeout)
    text = stderr.read_text()
    assert process.returncode == 0, f"{process.args} exited with {process.returncode}:\n{text[-3000:]}"
    return text


def _logged_steps(run: Path) -> list[int]:
    file = run / "metrics.jsonl"
    if not file.is_file():
        return []
    complete = file.read_text().rpartition("\n")[0]  # the child may be half way through a line
    return [json.loads(line)["step"] for line in complete.splitlines() if line.strip()]


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        tensors.update({f"{file.name}:{k}": v for k, v in load_file(str(file)).items()})
    return tensors


def _metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "examples_per_s"}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".tmp", ".old")))


def test_sigkill_at_a_random_step_then_resume_gives_the_uninterrupted_weights(tmp_path, tiny_bert_dir, csn_data):
    started = time.perf_counter()
    kill_at = random.Random(KILL_SEED).randint(EVERY + 1, TOTAL - 2)  # past the first checkpoint, before the end
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    victim = _structret(*_train_args(cut, tiny_bert_dir, csn_data), stderr=tmp_path / "cut.err")
    deadline = time.monotonic() + 120
    while not _logged_steps(cut) or _logged_steps(cut)[-1] < kill_at:
        assert victim.poll() is None, f"the run ended (exit {victim.returncode}) before step {kill_at}:\n" \
                                      f"{(tmp_path / 'cut.err').read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"step {kill_at} not reached in 120 s"
        time.sleep(0.002)
    victim.send_signal(signal.SIGKILL)
    killed = time.perf_counter()
    victim.wait(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    reached = _logged_steps(cut)[-1]
    saved = checkpoints(cut)
    last = int(saved[-1].name.split("-")[1])
    assert not (cut / "final").exists()

    resumed = _structret("train", "--out", str(cut), "--resume", stderr=tmp_path / "resume.err")
    _train_here(whole, tiny_bert_dir, csn_data)  # the uninterrupted run, while the child starts up
    log = _finish(resumed, tmp_path / "resume.err")

    # resume starts from the newest complete checkpoint and loses at most one interval
    assert f"resuming from checkpoint-{last:06d} (step {last} of {TOTAL})" in log
    assert last % EVERY == 0 and 0 <= reached - last <= EVERY, (reached, last)
    expected, got = _weights(whole / "final"), _weights(cut / "final")
    assert expected.keys() == got.keys() and len(expected) > 20
    differ = [k for k in expected if not torch.equal(expected[k], got[k])]
    assert not differ, f"{len(differ)} tensors differ after resume, e.g. {differ[:3]}"
    assert _metrics(cut) == _metrics(whole)  # every step's loss and learning rate, not only the end
    assert _leftovers(cut) == []  # a checkpoint save the kill cut short was cleaned up by the resumed run
    print(f"\nkill drawn at step >= {kill_at}; killed at step {reached}; resumed from step {last}; "
          f"{reached - last} steps redone; start to kill {killed - started:.1f} s, "
          f"in all {time.perf_counter() - started:.1f} s")


# --- killed while saving -------------------------------------------------------------------------

_DIE_IN_OPTIMIZER_SAVE = textwrap.dedent("""
    # the second checkpoint's optimizer.pt is written half, then the process kills itself
    import io, os, signal, sys
    import torch
    real_save, calls = torch.save, []
    def half_then_die(obj, f, *args, **kwargs):
        calls.append(f)
        if len(calls) < 2:
            return real_save(obj, f, *args, **kwargs)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        with open(f, "wb") as out:
            out.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            out.flush()
            os.fsync(out.fileno())
        os.kill(os.getpid(), signal.SIGKILL)
    torch.save = half_then_die
    from structret.cli import main
    sys.argv = ["structret", *sys.argv[1:]]
    main()
""")


def test_sigkill_while_writing_a_checkpoint_keeps_the_previous_one(tmp_path, tiny_bert_dir, csn_data):
    run = tmp_path / "run"
    args = _train_args(run, tiny_bert_dir, csn_data, max_steps=6, checkpoint_every=2)
    with (tmp_path / "child.err").open("w") as err:
        child = subprocess.run([sys.executable, "-c", _DIE_IN_OPTIMIZER_SAVE, *args], env=CHILD_ENV,
                               stdout=subprocess.DEVNULL, stderr=err, timeout=120)
    assert child.returncode == -signal.SIGKILL, (tmp_path / "child.err").read_text()[-3000:]

    # the half-written checkpoint exists only under its temporary name, and is not taken for one
    half = [p for p in run.iterdir() if p.name.startswith(".checkpoint-000004.")]
    assert len(half) == 1 and half[0].name.endswith(".tmp"), sorted(p.name for p in run.iterdir())
    written = (half[0] / "trainer" / "optimizer.pt").stat().st_size
    assert 0 < written and not (half[0] / "checksums.json").exists()
    assert not (run / "checkpoint-000004").exists()
    assert [p.name for p in checkpoints(run)] == ["checkpoint-000002"]
    verify_checksums(run / "checkpoint-000002")  # the previous checkpoint is whole

    resumed = _structret("train", "--out", str(run), "--resume", stderr=tmp_path / "resume.err")
    log = _finish(resumed, tmp_path / "resume.err")
    assert "resuming from checkpoint-000002 (step 2 of 6)" in log
    assert _logged_steps(run) == [1, 2, 3, 4, 5, 6]
    verify_checksums(run / "checkpoint-000004")
    assert json.loads((run / "final" / "structret.json").read_text())["step"] == 6
    assert _leftovers(run) == []  # the dead writer's temporary directory went when step 4 was saved again


def _embeddings(directory: Path, vectors: np.ndarray) -> Path:
    """An artifact as 'structret encode' writes it, without a model to encode with."""
    ids = [f"doc{i}" for i in range(len(vectors))]
    with atomic_dir(directory) as tmp:
        np.save(tmp / "embeddings.npy", vectors, allow_pickle=False)
        (tmp / "ids.json").write_text(json.dumps(ids))
        with gzip.open(tmp / "texts.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": i, "text": f"text of {i}"}) + "\n" for i in ids)
        write_meta(tmp, {"artifact": "embeddings", "what": "documents", "count": len(ids), "dim": vectors.shape[1],
                         "backbone": "hf-encoder", "model": "tiny", "model_override": None, "data": "test"})
    return directory


_INDEX_AND_DIE = textwrap.dedent("""
    import importlib, json, os, signal, sys
    where, module_name = sys.argv[1], sys.argv[2]
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "writing":
        # ids.json half written, after the index file and before structret.json
        module = importlib.import_module(module_name)
        def half_then_die(directory, ids):
            data = json.dumps(list(ids)).encode()
            with open(os.path.join(directory, "ids.json"), "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
            die()
        module.write_ids = half_then_die
    else:
        # the new index has just taken the final name; the previous one is not yet deleted
        import structret.artifacts as artifacts
        real = artifacts._exchange
        artifacts._exchange = lambda a, b: real(a, b) and die()
    from structret.cli import main
    sys.argv = ["structret", *sys.argv[3:]]
    main()
""")


@pytest.mark.parametrize("where", ["writing", "after-swap"])
@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_sigkill_while_saving_an_index_leaves_one_whole_index(tmp_path, kind, where):
    from structret.registry import get_registry

    rng = np.random.default_rng(0)
    queries = rng.standard_normal((5, 16)).astype("float32")
    old = get_registry().create("index", kind, 16)
    old.add([f"old{i}" for i in range(50)], rng.standard_normal((50, 16)).astype("float32"))
    old.save(tmp_path / "idx", meta={"backbone": "hf-encoder", "model": "tiny"})
    before = old.search(queries, 3)
    emb = _embeddings(tmp_path / "emb", rng.standard_normal((80, 16)).astype("float32"))

    module = {"flat": "structret_indexes.flat", "hnsw": "structret_indexes.hnsw"}[kind]
    child = subprocess.run([sys.executable, "-c", _INDEX_AND_DIE, where, module, "index", "--embeddings", str(emb),
                            "--index", kind, "--out", str(tmp_path / "idx")],
                           env=CHILD_ENV, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    temporary = [p for p in tmp_path.iterdir() if p.name.startswith(".idx.")]
    assert len(temporary) == 1 and temporary[0].name.endswith(".tmp"), sorted(p.name for p in tmp_path.iterdir())

    survivor = load_index(tmp_path / "idx")  # whichever index is there is whole and checks out
    if where == "writing":  # the previous index, untouched
        assert len(survivor) == 50
        got = survivor.search(queries, 3)
        np.testing.assert_array_equal(got[0], before[0])
        assert got[1] == before[1]
    else:  # the new one; the previous one waits, whole, under the temporary name
        assert len(survivor) == 80 and survivor.search(queries, 1)[1][0][0].startswith("doc")
        assert len(load_index(temporary[0])) == 50

    # the next save (here: the same command, not killed) removes the dead writer's directory
    again = subprocess.run([sys.executable, "-m", "structret.cli", "index", "--embeddings", str(emb),
                            "--index", kind, "--out", str(tmp_path / "idx")],
                           env=CHILD_ENV, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb", "idx"]
    assert len(load_index(tmp_path / "idx")) == 80


_SAVE_TWICE_DIE_BETWEEN_RENAMES = textwrap.dedent("""
    # a system without an atomic exchange: the previous artifact is moved aside, then the
    # process dies before the new one takes its name
    import os, signal, sys
    import structret.artifacts as artifacts
    artifacts._exchange = lambda a, b: False
    final = sys.argv[1]

    def save(text):
        with artifacts.atomic_dir(final) as tmp:
            (tmp / "data.txt").write_text(text)
    save("first")
    real_replace = os.replace
    def replace_then_die(src, dst):
        real_replace(src, dst)
        os.kill(os.getpid(), signal.SIGKILL)
    os.replace = replace_then_die
    save("second")
""")


def test_without_atomic_exchange_a_save_killed_between_renames_is_put_back(tmp_path):
    final = tmp_path / "artifact"
    child = subprocess.run([sys.executable, "-c", _SAVE_TWICE_DIE_BETWEEN_RENAMES, str(final)],
                           env=CHILD_ENV, capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert not final.exists() and (tmp_path / ".artifact.old" / "data.txt").read_text() == "first"

    # the next save puts the previous artifact back before it starts, so a failing save keeps it
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(final):
            raise KeyboardInterrupt
    assert (final / "data.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifact"]  # the new writer's and the dead one's temporaries are gone


_UPDATE_AND_DIE = textwrap.dedent("""
    # add to a saved flat index, killed at one point of the update
    import os, signal, sys
    import numpy as np
    import structret
    import structret.artifacts as artifacts
    where, idx, emb = sys.argv[1:4]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if where == "linking":  # some saved files linked into the new folder, not all
        real_link, calls = os.link, []
        os.link = lambda a, b: (calls.append(b), real_link(a, b), len(calls) == 2 and die())
    elif where == "segment":  # the added vectors half written
        real_save = np.save
        def save(file, arr, **kw):
            if "segments" in str(file):
                open(file, "wb").write(b"x" * 100)
                die()
            real_save(file, arr, **kw)
        np.save = save
    elif where == "checksums":  # everything written, the manifest not yet
        artifacts.write_checksums = lambda d: die()
    elif where == "after-swap":  # the new index in place, the old one not yet removed
        real = artifacts._exchange
        def exchange(a, b):
            done = real(a, b)
            if done and os.path.basename(b) == "idx":
                die()
            return done
        artifacts._exchange = exchange
    structret.update_index(idx, add=emb, show_progress=False)
""")


@pytest.mark.parametrize("where", ["linking", "segment", "checksums", "after-swap"])
def test_sigkill_during_an_update_leaves_the_old_or_the_new_index_and_it_verifies(tmp_path, where):
    from structret.api import SearchIndex
    from structret.api import load_index as load
    from structret.artifacts import verify_tree
    from structret.registry import get_registry

    rng = np.random.default_rng(0)
    old = get_registry().create("index", "flat", 16)
    old.add([f"old{i}" for i in range(50)], rng.standard_normal((50, 16)).astype("float32"))
    SearchIndex(old, meta={"model": "tiny"}, texts={f"old{i}": f"old text {i}" for i in range(50)}).save(
        tmp_path / "idx")
    emb = _embeddings(tmp_path / "emb", rng.standard_normal((5, 16)).astype("float32"))
    child = subprocess.run([sys.executable, "-c", _UPDATE_AND_DIE, where, str(tmp_path / "idx"), str(emb)],
                           env=CHILD_ENV, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]

    survivor = load(tmp_path / "idx")  # whole, and its checksums hold
    assert len(survivor) == (55 if where == "after-swap" else 50)
    assert len(survivor.texts) == len(survivor) and survivor.texts["old7"] == "old text 7"
    verify_tree(tmp_path / "idx")
    # the next update (not killed) applies on top of it, and cleans up what the dead one left
    again = subprocess.run([sys.executable, "-c", _UPDATE_AND_DIE, "none", str(tmp_path / "idx"),
                                       str(emb)], env=CHILD_ENV, capture_output=True, text=True, timeout=120)
    if where == "after-swap":  # its documents are in already: adding them again is refused, nothing changes
        assert again.returncode != 0 and "added twice" in again.stderr
        assert len(load(tmp_path / "idx")) == 55
    else:
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(load(tmp_path / "idx")) == 55 and len(os.listdir(tmp_path / "idx" / "segments")) == 2
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["emb", "idx"]
