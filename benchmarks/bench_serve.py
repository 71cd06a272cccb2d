"""``structret serve`` under warm queries and under load, against the in-process Python API.

The index: 100,000 384-d vectors of the bundled all-MiniLM-L6-v2 in an ``hnsw`` index (its
defaults: M=16, ef=100). Encoding 100k real documents on a CPU takes too long, so it holds
every function ``structret mine`` keeps from the Python standard library, encoded once
(real vectors, real code as their texts), topped up to ``--vectors`` with synthetic
near-copies: a real vector plus Gaussian noise, re-normalised, id ``syn-...`` and a short
text naming its source. Near-copies keep the clustered shape a graph index sees in a real
corpus (pure Gaussian vectors would be its worst case). The index is saved under
``--work`` and re-used by later runs.

Then a real ``structret serve`` runs in a subprocess on a free 127.0.0.1 port:

1. warm latency: ``--queries`` sequential GET /api/search (k=10) over a fixed list of
   docstring-like queries, each followed by the same query through ``index.search(model, q)``
   in this process (the peer: no HTTP, no JSON, no entity marking), interleaved so drift on
   a shared CPU hits both alike; p50/p90/p99 of each, their ratio, and where the server's
   time goes (``model_ms``, ``took_ms - model_ms``, the rest);
2. load: ``--load`` queries from ``--clients`` concurrent clients, ``--rounds`` times; every
   status code and connection error counted, throughput, p50/p99, how many queries the server
   encoded per forward, and the server's RSS (VmRSS) before, every 0.5 s during, and after
   each round. Exits 1 if any request failed or was not answered 200. ::

    python benchmarks/bench_serve.py --work /tmp/bench-serve          # 100k vectors, 300 + 2,000 queries
    python benchmarks/bench_serve.py --small --work /tmp/bench-small  # seconds of queries: a smoke check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

# what someone searching code types: docstring-like lines, none copied from the corpus
QUERIES = [
    "read a configuration file and return its settings",
    "parse an ISO 8601 date string",
    "send an email message through an SMTP server",
    "sort a list of dictionaries by a key",
    "count how often each word occurs in a text",
    "join path components with the system separator",
    "decode a base64 encoded string",
    "compute the md5 checksum of a file",
    "split a URL into scheme, host and path",
    "escape special characters in HTML",
    "convert a string to title case",
    "return the current time in UTC",
    "create a temporary directory and remove it afterwards",
    "read a CSV file into a list of rows",
    "serialize an object to JSON",
    "compress data with gzip",
    "extract files from a tar archive",
    "check whether a path is a symbolic link",
    "wait for a subprocess to finish and return its exit code",
    "format a number with thousands separators",
    "generate a random password",
    "quote a string for use in a shell command",
    "parse command line arguments",
    "open a socket connection to a host and port",
    "decode bytes using the given encoding, replacing errors",
    "find all files matching a glob pattern",
    "copy a file preserving its metadata",
    "wrap text to a given width",
    "compute the greatest common divisor of two integers",
    "return the names of the fields of a dataclass",
    "log an error message with a traceback",
    "read the headers of an HTTP response",
    "remove leading and trailing whitespace from each line",
    "get an environment variable with a default value",
    "iterate over the lines of a file lazily",
    "validate an email address",
    "merge two sorted lists",
    "convert a relative path to an absolute one",
    "lock a file for exclusive access",
    "parse an XML document and return the root element",
]

K = 10
WARM_UP = 10  # queries before timing: first requests pay for lazy imports and allocator growth
NOISE_NORM = 0.3  # length of the noise added to a unit vector: near-copies, not duplicates


def percentiles(ms: list[float]) -> dict[str, float]:
    ordered = np.asarray(ms)
    return {p: float(np.percentile(ordered, q)) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}


# --- the index ---------------------------------------------------------------------------


def mined_corpus(source: Path, work: Path) -> Path:
    """The CodeSearchNet rows ``structret mine`` keeps from ``source`` (cached)."""
    out = work / f"mined-{source.name}.jsonl.gz"
    if not out.is_file():
        print(f"mining {source} ...", flush=True)
        subprocess.run([sys.executable, "-m", "structret.cli", "mine", str(source), "--language", "python",
                        "--out", str(out), "--workers", "2"], check=True)
    return out


def real_documents(source: Path, work: Path, model) -> tuple[list[str], list[str], np.ndarray]:
    """(ids, texts, vectors) of the mined functions, as ``structret index --data`` would make
    them; the vectors are cached, since encoding is the slow part."""
    import structret

    dataset = structret.load_dataset(f"codesearchnet:{mined_corpus(source, work)}")  # every split
    ids = list(dataset.corpus)
    texts = [model.text(record, "document") for record in dataset.corpus.values()]
    cache = work / f"vectors-{source.name}-{len(ids)}.npy"
    if cache.is_file():
        vectors = np.load(cache, allow_pickle=False)
    else:
        print(f"encoding {len(ids):,} functions with {model.name} (once; cached in {cache}) ...", flush=True)
        start = time.perf_counter()
        vectors = np.asarray(model.encode_document(texts, batch_size=32, show_progress=True), dtype=np.float32)
        print(f"  {time.perf_counter() - start:.0f} s", flush=True)
        np.save(cache, vectors)
    return ids, texts, vectors


def synthetic_near_copies(ids: list[str], vectors: np.ndarray, count: int, seed: int = 0):
    """``count`` unit vectors, each a real one (in turn) plus Gaussian noise of norm ~NOISE_NORM."""
    rng = np.random.default_rng(seed)
    sources = np.arange(count) % len(vectors)
    noise = rng.standard_normal((count, vectors.shape[1])).astype(np.float32)
    noise *= NOISE_NORM / np.sqrt(vectors.shape[1])
    made = vectors[sources] + noise
    made /= np.linalg.norm(made, axis=1, keepdims=True)
    made_ids = [f"syn-{j}" for j in range(count)]
    # short texts: the JSON of a synthetic hit stays small, and it says what it is
    made_texts = [f"synthetic near-copy of {ids[s]}" for s in sources]
    return made_ids, made_texts, made


def ensure_index(args) -> tuple[Path, str]:
    """The saved index (built once per --vectors and --source) and a sentence on what it holds."""
    out = args.work / f"index-hnsw-{args.vectors}-{args.source.name}"
    # beside the index, not in it: the index's checksums.json refuses files it does not list
    about = args.work / f"{out.name}.about.json"
    if about.is_file():
        return out, json.loads(about.read_text())["holds"]
    import structret

    args.work.mkdir(parents=True, exist_ok=True)
    model = structret.load_model("minilm")
    ids, texts, vectors = real_documents(args.source, args.work, model)
    real = min(len(ids), args.vectors)
    ids, texts, vectors = ids[:real], texts[:real], vectors[:real]
    made_ids, made_texts, made = synthetic_near_copies(ids, vectors, args.vectors - real)
    print(f"building hnsw over {args.vectors:,} vectors ...", flush=True)
    start = time.perf_counter()
    index = structret.build_index(model, np.concatenate([vectors, made]), ids=ids + made_ids,
                                  texts=texts + made_texts, kind="hnsw")
    index.save(out)
    holds = (f"{args.vectors:,} x {vectors.shape[1]}-d unit vectors of {model.name}: {real:,} real (functions "
             f"mined from {args.source}, their code as texts) + {len(made_ids):,} synthetic (a real vector + "
             f"Gaussian noise of norm ~{NOISE_NORM}, re-normalised; ids syn-N, short texts); hnsw (the defaults) "
             f"M={index.index.M}, ef_construction={index.index.ef_construction}, ef={index.index.ef}")
    about.write_text(json.dumps({"holds": holds, "build_s": round(time.perf_counter() - start, 1)}))
    print(f"  built and saved in {time.perf_counter() - start:.0f} s", flush=True)
    return out, holds


# --- the server --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, fields 14 and 15); NaN once it has exited."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB; NaN once it has exited (a crash is reported, not raised here)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return float("nan")
    kb = next((line.split()[1] for line in lines if line.startswith("VmRSS:")), None)  # a zombie has none
    return int(kb) / 1024 if kb else float("nan")


class Server:
    """``structret serve INDEX`` in a subprocess, its output in a log file."""

    def __init__(self, index_dir: Path, log: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "structret.cli", "serve", str(index_dir), "--port", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT)

    def wait_healthy(self, limit_s: float = 600) -> dict:
        import httpx

        deadline = time.monotonic() + limit_s  # loading torch and 100k vectors on a busy machine
        while True:
            if self.process.poll() is not None:
                sys.exit(f"the server exited ({self.process.returncode}):\n{self.log.read_text()}")
            try:
                return httpx.get(f"{self.base}/api/health", timeout=5).json()
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    sys.exit(f"the server did not answer /api/health in {limit_s:.0f} s:\n{self.log.read_text()}")
                time.sleep(0.5)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- 1. warm latency ---------------------------------------------------------------------


def warm_latency(server: Server, index_dir: Path, n: int) -> None:
    import httpx

    import structret

    index = structret.load_index(index_dir)
    model = index.model  # the same weights the server loaded
    http: list[float] = []
    local: list[float] = []
    model_ms: list[float] = []
    search_ms: list[float] = []
    model_share: list[float] = []
    rest_ms: list[float] = []
    differ = 0
    with httpx.Client(base_url=server.base, timeout=60) as client:  # one keep-alive connection
        for i in range(WARM_UP + n):
            query = QUERIES[i % len(QUERIES)]
            start = time.perf_counter()
            response = client.get("/api/search", params={"q": query, "k": K})
            body = response.json()
            elapsed = (time.perf_counter() - start) * 1000
            if response.status_code != 200:
                sys.exit(f"warm query {query!r} got {response.status_code}: {body}")
            start = time.perf_counter()
            hits = index.search(model, query, k=K)
            local_elapsed = (time.perf_counter() - start) * 1000
            if i < WARM_UP:
                continue
            # same saved index, same weights: a difference would mean the two paths are not comparable
            differ += [h["id"] for h in body["hits"]] != [h.id for h in hits]
            http.append(elapsed)
            local.append(local_elapsed)
            model_ms.append(body["model_ms"])
            search_ms.append(body["took_ms"] - body["model_ms"])
            model_share.append(body["model_ms"] / elapsed)
            rest_ms.append(elapsed - body["took_ms"])
    served, peer = percentiles(http), percentiles(local)
    print(f"\n1. warm latency: {n} sequential queries (k={K}, {len(QUERIES)} distinct, after {WARM_UP} warm-ups), "
          f"each over HTTP and then through the Python API in this process")
    print(f"{'':34} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    print(f"{'GET /api/search (client-observed)':34} " + " ".join(f"{served[p]:8.2f}" for p in served))
    print(f"{'index.search(model, q) in-process':34} " + " ".join(f"{peer[p]:8.2f}" for p in peer))
    print(f"{'ratio HTTP / in-process':34} " + " ".join(f"{served[p] / peer[p]:7.2f}x" for p in served))
    print(f"server's parts (medians): query encoding (model_ms) {statistics.median(model_ms):.2f} ms = "
          f"{statistics.median(model_share):.0%} of the client's time; index search (took_ms - model_ms) "
          f"{statistics.median(search_ms):.2f} ms; the rest (entity marks, JSON, HTTP, client) "
          f"{statistics.median(rest_ms):.2f} ms")
    print(f"queries whose top {K} differ between the server and the Python API: {differ} of {n}")


# --- 2. load -----------------------------------------------------------------------------


class RssSampler(threading.Thread):
    def __init__(self, pid: int, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append(rss_mb(self.pid))
            self.stopped.wait(self.every_s)


async def hammer(base: str, total: int, clients: int, timeout_s: float):
    """``total`` GET /api/search from ``clients`` concurrent workers: (statuses, errors, ms, batches, s)."""
    import httpx

    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    ms: list[float] = []
    batches: list[int] = []  # how many queries the server encoded in the forward that answered each
    issued = iter(range(total))  # shared: each worker takes the next query number

    async def worker(client) -> None:
        for i in issued:
            start = time.perf_counter()
            try:
                response = await client.get("/api/search", params={"q": QUERIES[i % len(QUERIES)], "k": K})
                if response.status_code == 200:
                    batches.append(response.json()["batch"])  # a whole, parseable answer, as a real client needs
            except httpx.HTTPError as exc:  # connect, read, timeout, protocol: each counted by kind
                errors[type(exc).__name__] += 1
                continue
            except ValueError:  # a 200 whose body is not JSON
                errors["bad JSON"] += 1
                continue
            statuses[response.status_code] += 1
            ms.append((time.perf_counter() - start) * 1000)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        seconds = time.perf_counter() - start
    return statuses, errors, ms, batches, seconds


def load(server: Server, total: int, clients: int, round_: int) -> bool:
    pid = server.process.pid
    before = rss_mb(pid)
    sampler = RssSampler(pid)
    sampler.start()
    server_cpu, client_cpu = cpu_seconds(pid), time.process_time()
    # one request waits behind at most one batch of the others: 120 s is far beyond
    statuses, errors, ms, batches, seconds = asyncio.run(hammer(server.base, total, clients, timeout_s=120))
    server_cpu, client_cpu = cpu_seconds(pid) - server_cpu, time.process_time() - client_cpu
    sampler.stopped.set()
    sampler.join()
    time.sleep(1)  # let the server settle (responses freed) before the last reading
    after = rss_mb(pid)
    ok = statuses.get(200, 0)
    not_ok = sum(n for code, n in statuses.items() if code != 200)
    dropped = sum(errors.values())
    p = percentiles(ms) if ms else {"p50": float("nan"), "p99": float("nan")}
    print(f"\n2. load, round {round_}: {total:,} queries from {clients} concurrent clients (k={K}, timeout 120 s each)")
    print(f"{seconds:.1f} s, {ok / seconds:.1f} queries/s answered 200; latency p50 {p['p50']:.1f} ms, "
          f"p99 {p['p99']:.1f} ms")
    print(f"status codes: {dict(sorted(statuses.items()))}; non-200: {not_ok}; dropped (no response): {dropped}"
          + (f" {dict(errors)}" if errors else ""))
    if batches:
        print(f"queries per forward (the server batches concurrent queries): median {statistics.median(batches):.0f}, "
              f"max {max(batches)}")
    # on one machine the clients take CPU from the server: how much, so the rate can be read fairly
    print(f"CPU during the load: server {server_cpu:.1f} s ({server_cpu / seconds:.2f} cores), clients (this "
          f"process) {client_cpu:.1f} s ({client_cpu / seconds:.2f} cores), of {os.cpu_count()} cores")
    peak = max(x for x in [before, after, *sampler.samples] if x == x)  # NaN: the server had exited
    print(f"server RSS: before {before:.0f} MB, peak {peak:.0f} MB during ({len(sampler.samples)} samples every "
          f"0.5 s), after {after:.0f} MB (after - before {after - before:+.0f} MB)")
    alive = server.process.poll() is None
    if not alive:
        print(f"the server exited during the load (code {server.process.returncode}); its log: {server.log}")
    return alive and not_ok == 0 and dropped == 0 and ok == total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cache = Path(os.environ.get("STRUCTRET_CACHE", Path.home() / ".cache" / "structret"))
    parser.add_argument("--work", type=Path, default=cache / "bench-serve",
                        help="where the mined corpus, its vectors and the index are kept between runs")
    parser.add_argument("--vectors", type=int, default=None, help="index size (default 100,000)")
    parser.add_argument("--queries", type=int, default=None, help="warm sequential queries (default 300)")
    parser.add_argument("--load", type=int, default=None, help="queries under load (default 2,000)")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients under load (default 16)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="load rounds one after another: memory that keeps growing shows from round 2 on")
    parser.add_argument("--source", type=Path, default=None,
                        help="Python source tree to mine the real functions from (default: the standard library)")
    parser.add_argument("--small", action="store_true",
                        help="a smoke run: 2,000 vectors from the email package, 20 queries, load 100 with 4 clients")
    args = parser.parse_args()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    defaults = ((2_000, 20, 100, 4, stdlib / "email") if args.small else (100_000, 300, 2_000, 16, stdlib))
    for name, value in zip(("vectors", "queries", "load", "clients", "source"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, value)
    import torch

    index_dir, holds = ensure_index(args)
    print(f"index {index_dir}: {holds}")
    server = Server(index_dir, args.work / "server.log")
    try:
        start = time.perf_counter()
        health = server.wait_healthy()
        print(f"server pid {server.process.pid} on {server.base}: healthy after {time.perf_counter() - start:.1f} s, "
              f"{health['index_size']:,} documents, model {health['model']}, entities {health['extractor']}, "
              f"RSS {rss_mb(server.process.pid):.0f} MB; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
              f"torch threads here {torch.get_num_threads()}")
        warm_latency(server, index_dir, args.queries)
        passed = all([load(server, args.load, args.clients, r) for r in range(1, args.rounds + 1)])
    finally:
        server.stop()
    if not passed:
        sys.exit(f"FAILED: some requests under load were not answered 200 (server log: {server.log})")


if __name__ == "__main__":
    main()
