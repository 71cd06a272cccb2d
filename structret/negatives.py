"""ANCE-style hard negatives: each query's top-ranked documents from the model's own index,
minus its positives, written as Tevatron training lines for the ``dr`` objective.

Optionally filtered as NV-Retriever (Moreira et al. 2024) mines them, "positive-aware": a
candidate scoring too close to the query's positive is likely an unjudged relevant document
(a false negative) and is dropped before sampling. The scores are the mining model's, or a
judge's: a teacher bi-encoder or a sentence-transformers cross-encoder.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from structret import defaults
from structret.contracts import Backbone
from structret.errors import StructretError
from structret.search.build import choose_index
from structret.models import load_model
from structret.records import CodeRecord, Dataset, ItemRecord
from structret.registry import get_registry

FILTER_HELP = ("margin:M drops candidates scoring above (positive's score - M); percent:P drops those above "
               "P x the positive's score (0 < P <= 1), e.g. margin:0.05 or percent:0.95")


@dataclass(frozen=True)
class NegativeFilter:
    """NV-Retriever's positive-aware thresholds: TopK-MarginPos (``margin``) and TopK-PercPos (``percent``).

    A candidate is kept when its score is at most ``threshold(positive score)``. For
    ``percent`` the threshold is ``pos - (1 - P) * |pos|``: P x pos for the usual positive
    score, and still below the positive when a score is negative (a cross-encoder's logit,
    a cosine below zero), where P x pos would lie above it.
    """

    kind: str  # "margin" | "percent"
    value: float

    @classmethod
    def parse(cls, spec: str) -> NegativeFilter:
        match = re.fullmatch(r"\s*(margin|percent)\s*:\s*([^\s]+)\s*", spec or "")
        value = None
        if match:
            try:
                value = float(match.group(2))
            except ValueError:
                value = None
        if not match or value is None or value != value:  # NaN
            raise StructretError(f"'{spec}' is not a filter: {FILTER_HELP}.")
        kind = match.group(1)
        if kind == "margin" and value < 0:
            raise StructretError(f"'{spec}': the margin must be 0 or more (a score difference), "
                                 f"e.g. margin:0.05.")
        if kind == "percent" and not 0 < value <= 1:
            raise StructretError(f"'{spec}': the percent is a fraction in (0, 1] of the positive's "
                                 f"score, e.g. percent:0.95 (NV-Retriever's best setting).")
        return cls(kind, value)

    def threshold(self, positive: float) -> float:
        if self.kind == "margin":
            return positive - self.value
        return positive - (1.0 - self.value) * abs(positive)

    def __str__(self) -> str:
        return f"{self.kind}:{self.value:g}"


@dataclass
class Candidates:
    """One query's top-ranked non-positive documents, best first, with the scores they are filtered by.

    ``positive_score`` is the lowest score among the query's positives: a candidate
    scoring as high as any known positive is as likely relevant as that positive, so the
    weakest positive is the bar (the strongest would keep candidates that outscore a
    true positive).
    """

    qid: str
    positives: list[str]
    docs: list[str]
    scores: list[float]
    positive_score: float
    positive_in_top: bool


@dataclass
class NegativesReport:
    queries: int = 0
    written: int = 0
    no_negatives: int = 0
    positives_in_top: int = 0
    out: str = ""
    filter: str = ""
    judge: str = ""
    candidates: int = 0  # top-ranked non-positives considered, over all queries
    dropped: int = 0  # of those, dropped by the filter
    queries_with_drops: int = 0
    emptied_by_filter: int = 0  # queries that had candidates and lost all of them to the filter
    max_dropped: int = 0  # most candidates dropped for one query
    report: str = ""  # the JSON report beside the output
    dropped_per_query: list[int] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        text = (f"hard negatives: {self.queries} queries = {self.written} written + {self.no_negatives} "
                f"without any negative; a positive was in the top-k for {self.positives_in_top}; wrote {self.out}")
        if self.filter:
            share = self.dropped / self.candidates if self.candidates else 0.0
            mean = self.dropped / self.queries if self.queries else 0.0
            text += (f"\nfilter {self.filter} (scored by {self.judge}): dropped {self.dropped} of "
                     f"{self.candidates} candidates ({share:.1%}), {mean:.2f} per query (at most "
                     f"{self.max_dropped}); {self.queries_with_drops} queries lost at least one, "
                     f"{self.emptied_by_filter} lost all and have no negative")
        if self.report:
            text += f"; report {self.report}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("dropped_per_query")
        data["dropped_share"] = self.dropped / self.candidates if self.candidates else 0.0
        data["dropped_per_query_mean"] = self.dropped / self.queries if self.queries else 0.0
        return data


def _passage(dataset: Dataset, doc_id: str) -> dict[str, str]:
    # Tevatron keeps the title apart; readers join "title text" back, as record.text() does
    record = dataset.corpus[doc_id]
    if isinstance(record, CodeRecord):
        return {"docid": doc_id, "title": "", "text": record.code}
    if isinstance(record, ItemRecord):
        return {"docid": doc_id, "title": record.title, "text": record.content}
    return {"docid": doc_id, "title": record.title, "text": record.text_}


def _judged_queries(dataset: Dataset) -> list[str]:
    return [q for q in dataset.queries if any(g > 0 for g in dataset.qrels.get(q, {}).values())]


def rank_candidates(backbone: Backbone, dataset: Dataset, *, depth: int = 100, batch_size: int = 32,
                    index: str = defaults.INDEX, show_progress: bool = True) -> list[Candidates]:
    """Every judged query's top ``depth`` documents minus its positives, scored by ``backbone``.

    The scores are the dot products of the backbone's vectors (what its index ranks by),
    recomputed exactly whatever the index, so an approximate index changes only which
    documents are candidates; the positive's score is computed the same way.
    """
    import numpy as np

    doc_ids = list(dataset.corpus)
    row_of = {d: i for i, d in enumerate(doc_ids)}
    vectors = np.asarray(backbone.encode([dataset.corpus[d].text() for d in doc_ids], kind="document",
                                         batch_size=batch_size, show_progress=show_progress), dtype=np.float32)
    name, options = choose_index(index, len(vectors))
    idx = get_registry().create("index", name, int(vectors.shape[1]), **options)
    idx.add(doc_ids, vectors)
    qids = _judged_queries(dataset)
    query_vectors = np.asarray(backbone.encode([dataset.queries[q].text for q in qids], kind="query",
                                               batch_size=batch_size, show_progress=show_progress), dtype=np.float32)
    _, ranked = idx.search(query_vectors, depth)
    out = []
    for qid, qv, top in zip(qids, query_vectors, ranked):
        positives = sorted(d for d, g in dataset.qrels[qid].items() if g > 0 and d in row_of)
        docs = [d for d in top if d not in positives]
        out.append(_dot_scored(qid, positives, docs, bool(set(positives) & set(top)), vectors, row_of, qv))
    return out


def rank_candidates_lexical(retriever: Any, dataset: Dataset, *, depth: int = 100, chunk: int = 256,
                            show_progress: bool = True) -> list[Candidates]:
    """Every judged query's top ``depth`` documents minus its positives, scored by a lexical
    retriever (``fit``/``score``, e.g. ``bm25-fields``): negatives that the lexical side ranks
    high, for a dense model trained to cover what the lexical side gets wrong."""
    import numpy as np

    doc_ids = list(dataset.corpus)
    row_of = {d: i for i, d in enumerate(doc_ids)}
    retriever.fit([dataset.corpus[d].text() for d in doc_ids])
    qids = _judged_queries(dataset)
    out = []
    for start in tqdm(range(0, len(qids), chunk), desc="ranking", unit="chunk", disable=not show_progress):
        part = qids[start:start + chunk]
        scores = np.asarray(retriever.score([dataset.queries[q].text for q in part]), dtype=np.float32)
        top = np.argpartition(-scores, min(depth, scores.shape[1]) - 1, axis=1)[:, :depth]
        for qid, row, candidates in zip(part, scores, top):
            ranked = [doc_ids[i] for i in candidates[np.argsort(-row[candidates], kind="stable")]]
            positives = sorted(d for d, g in dataset.qrels[qid].items() if g > 0 and d in row_of)
            docs = [d for d in ranked if d not in positives]
            positive = [float(row[row_of[d]]) for d in positives]
            out.append(Candidates(qid, positives, docs, [float(row[row_of[d]]) for d in docs],
                                  min(positive) if positive else float("nan"), bool(set(positives) & set(ranked))))
    return out


def _dot_scored(qid: str, positives: list[str], docs: list[str], positive_in_top: bool, vectors: Any,
                row_of: dict[str, int], query: Any) -> Candidates:
    """A query's candidates scored by dot products with the documents' rows of ``vectors``."""
    def scores(ids: list[str]) -> list[float]:
        return [float(s) for s in vectors[[row_of[d] for d in ids]] @ query] if ids else []

    positive = scores(positives)
    return Candidates(qid, positives, docs, scores(docs), min(positive) if positive else float("nan"),
                      positive_in_top)


def is_cross_encoder(path: str) -> bool:
    """A local folder holding a sequence-classification model (what sentence-transformers'
    CrossEncoder saves), as opposed to an encoder a bi-encoder backbone loads."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        architectures = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return False
    return any(str(a).endswith("ForSequenceClassification") for a in architectures)


def judge_candidates(judge: Any, dataset: Dataset, candidates: list[Candidates], *, batch_size: int = 32,
                     show_progress: bool = True) -> list[Candidates]:
    """The same candidates, rescored by ``judge``: a sentence-transformers CrossEncoder folder
    (each (query, document) pair scored jointly), else any model ``structret.load_model`` opens
    (a backbone name, a run directory, a model folder) as a teacher bi-encoder (dot products);
    or a loaded ``structret.Model``."""
    if isinstance(judge, str) and is_cross_encoder(judge):
        return _cross_encoder_scores(judge, dataset, candidates, batch_size, show_progress)
    import numpy as np

    model = load_model(judge) if isinstance(judge, str) else judge
    needed = sorted({d for c in candidates for d in (*c.docs, *c.positives)})
    row_of = {d: i for i, d in enumerate(needed)}
    docs = np.asarray(model.backbone.encode([dataset.corpus[d].text() for d in needed], kind="document",
                                            batch_size=batch_size, show_progress=show_progress), dtype=np.float32)
    queries = np.asarray(model.backbone.encode([dataset.queries[c.qid].text for c in candidates], kind="query",
                                               batch_size=batch_size, show_progress=show_progress), dtype=np.float32)
    return [_dot_scored(c.qid, c.positives, c.docs, c.positive_in_top, docs, row_of, qv)
            for c, qv in zip(candidates, queries)]


def _cross_encoder_scores(path: str, dataset: Dataset, candidates: list[Candidates], batch_size: int,
                          show_progress: bool) -> list[Candidates]:
    try:
        # sentence_transformers: the export extra, loaded for a cross-encoder judge only
        from sentence_transformers import CrossEncoder
    except ImportError as e:
        raise StructretError(f"--judge {path} is a cross-encoder, which needs sentence-transformers: "
                             f"pip install 'structret[export]'.") from e
    try:
        model = CrossEncoder(str(path), device="cpu")
    except Exception as e:  # whatever transformers raises for a damaged folder: say which folder
        raise StructretError(f"--judge {path}: could not load it as a sentence-transformers CrossEncoder "
                             f"({type(e).__name__}: {e}).") from e
    pairs: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for c in candidates:
        start = len(pairs)
        query = dataset.queries[c.qid].text
        pairs += [(query, dataset.corpus[d].text()) for d in (*c.positives, *c.docs)]
        spans.append((start, len(c.positives)))
    scores = model.predict(pairs, batch_size=batch_size, show_progress_bar=show_progress) if pairs else []
    scores = [float(s) for s in scores]
    judged = []
    for c, (start, n_pos) in zip(candidates, spans):
        pos = scores[start:start + n_pos]
        judged.append(Candidates(c.qid, c.positives, c.docs, scores[start + n_pos:start + n_pos + len(c.docs)],
                                 min(pos) if pos else float("nan"), c.positive_in_top))
    return judged


def write_negatives(dataset: Dataset, candidates: list[Candidates], out: str | os.PathLike, *, keep: int = 30,
                    seed: int = 0, filter: NegativeFilter | None = None, judge: str = "the mining model",
                    report_path: str | os.PathLike | None = None) -> NegativesReport:
    """Drop what ``filter`` rejects, sample ``keep`` of the rest per query, write Tevatron lines
    (atomically) and, with ``report_path``, the report as JSON (counts, and dropped per query)."""
    rng = random.Random(seed)
    report = NegativesReport(queries=len(candidates), out=str(out), filter=str(filter) if filter else "",
                             judge=judge if filter else "", report=str(report_path or ""))
    tmp = Path(f"{out}.tmp")
    opener = gzip.open if str(out).endswith(".gz") else open
    with opener(tmp, "wt", encoding="utf-8") as f:
        for c in candidates:
            report.positives_in_top += c.positive_in_top
            negatives = c.docs
            report.candidates += len(negatives)
            if filter is not None:
                # a query whose positive has no score (not in the corpus) cannot be judged: keep its candidates
                if c.positive_score == c.positive_score:
                    bar = filter.threshold(c.positive_score)
                    negatives = [d for d, s in zip(c.docs, c.scores) if s <= bar]
                dropped = len(c.docs) - len(negatives)
                report.dropped += dropped
                report.dropped_per_query.append(dropped)
                report.max_dropped = max(report.max_dropped, dropped)
                report.queries_with_drops += dropped > 0
                report.emptied_by_filter += bool(c.docs) and not negatives
            if not negatives:
                report.no_negatives += 1
                continue
            chosen = rng.sample(negatives, min(keep, len(negatives)))
            f.write(json.dumps({
                "query_id": c.qid,
                "query": dataset.queries[c.qid].text,
                "positive_passages": [_passage(dataset, d) for d in c.positives],
                "negative_passages": [_passage(dataset, d) for d in chosen],
            }) + "\n")
            report.written += 1
    os.replace(tmp, out)
    if report_path:
        data = report.to_dict()
        data["dropped_histogram"] = _histogram(report.dropped_per_query) if filter else {}
        tmp_report = Path(f"{report_path}.tmp")
        tmp_report.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp_report, report_path)
    return report


def _histogram(values: list[int]) -> dict[str, int]:
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return {str(k): counts[k] for k in sorted(counts)}


def report_path_for(out: str | os.PathLike) -> str:
    """``negatives.jsonl.gz`` -> ``negatives.report.json``, beside it."""
    name = str(out)
    for suffix in (".jsonl.gz", ".jsonl", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".report.json"
    return name + ".report.json"


def mine_negatives(backbone: Backbone | None, dataset: Dataset, out: str | os.PathLike, *, depth: int = 100,
                   keep: int = 30, seed: int = 0, batch_size: int = 32, index: str = defaults.INDEX,
                   show_progress: bool = True, filter: NegativeFilter | str | None = None,
                   judge: str | None = None, report: bool = True, lexical: str | None = None) -> NegativesReport:
    """Rank the corpus for every judged query, drop its positives (and, with ``filter``, the
    candidates scoring too close to them), keep ``keep`` of the top ``depth``. The ranking is
    ``backbone``'s, or with ``lexical`` that registered lexical retriever's (``bm25-fields``).

    SANTA (following ANCE) samples its hard negatives at random from the top 100 of its
    own index; sampling ``keep`` of them here, seeded, keeps the file small while the
    ``dr`` objective still draws from a pool the model found hard. ``judge`` rescoring the
    candidates only matters with a ``filter``. ``report``: also write the counts as JSON
    beside ``out`` (``report_path_for``).
    """
    if isinstance(filter, str):
        filter = NegativeFilter.parse(filter)
    if judge and filter is None:
        raise StructretError("a judge scores the candidates for a filter; give one too, e.g. filter='percent:0.95'.")
    scorer: Any = judge
    if judge and not is_cross_encoder(judge):
        scorer = load_model(judge)  # before the mining's encoding: a judge that cannot load fails at once
    if lexical:
        candidates = rank_candidates_lexical(get_registry().create("retriever", lexical), dataset, depth=depth,
                                             show_progress=show_progress)
    elif backbone is None:
        raise StructretError("mine_negatives: give a backbone to rank with, or lexical='bm25-fields' (a lexical retriever).")
    else:
        candidates = rank_candidates(backbone, dataset, depth=depth, batch_size=batch_size, index=index,
                                     show_progress=show_progress)
    if judge:
        candidates = judge_candidates(scorer, dataset, candidates, batch_size=batch_size, show_progress=show_progress)
    return write_negatives(dataset, candidates, out, keep=keep, seed=seed, filter=filter,
                           judge=judge or (lexical or "the mining model"),
                           report_path=report_path_for(out) if report else None)
