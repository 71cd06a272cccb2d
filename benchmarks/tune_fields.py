"""Choose a field-weighted BM25's weights on validation data, and report what each field contributes.

``bm25-fields`` (a function's name, signature, calls, comments, body) or ``bm25-item-fields`` (an
item's title, content and each aspect): each field's BM25 scores every validation query against
every validation document once, as the dataset's protocol reads them; a weighting is then a
weighted sum of those score matrices, scored by the protocol itself (the measure bench reports:
MRR@100 over the full pool for code, the dataset's own measures for a catalog). The search is
coordinate ascent from the whole text alone (body, or content): each field's weight in turn
tried at every value of GRID, the best kept, until a pass changes nothing. Then each chosen
field is dropped in turn (weight 0) and the loss printed: the field's contribution. ::

    python benchmarks/tune_fields.py --data "codesearchnet:/work/data/code/ablation/*.jsonl.gz" --split valid
    python benchmarks/tune_fields.py --retriever bm25-item-fields --data debian-packages:/var/lib/apt/lists \
        --data-option limit=3000 --data-option half=open --split valid --measure nDCG@50

Prints the chosen weights as ``--set NAME.weights=...`` takes them. Selection data only: the test
split is scored once, later, by ``structret bench`` with the chosen weights.
"""

from __future__ import annotations

import argparse

import numpy as np

GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="FORMAT:PATH")
    parser.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--retriever", default="bm25-fields", choices=["bm25-fields", "bm25-item-fields"])
    parser.add_argument("--measure", help="the protocol column to choose by (default: its first)")
    args = parser.parse_args()

    from structret.datasets import load_dataset
    from structret.registry.keyvalue import parse_options
    from structret.evaluation import make_protocol
    from structret.evaluation.protocols import own_text, query_text
    from structret.registry import get_registry

    dataset = load_dataset(args.data, args.split, **parse_options(tuple(args.data_option)))
    protocol = make_protocol(dataset)
    measure = args.measure or protocol.columns[0]
    if measure not in protocol.columns:
        parser.error(f"--measure {measure}: the protocol measures {', '.join(protocol.columns)}")
    if args.retriever == "bm25-fields":
        fields = get_registry().create("retriever", args.retriever).weights  # every field it reads, by default weight
        retriever = get_registry().create("retriever", args.retriever, weights=",".join(f"{f}:1" for f in fields))
        whole = "body"
    else:
        retriever = get_registry().create("retriever", args.retriever, weights="title:1,content:1,aspects:1")
        whole = "content"
    protocol.bind(getattr(retriever, "format_document", own_text), query_text)
    retriever.fit(protocol.doc_texts)
    queries = protocol.query_texts()
    rows = retriever.field_scores(queries)
    row_of = {q: i for i, q in enumerate(queries)}
    fields = list(rows)

    class Weighted:
        """The fields' cached scores summed with one weighting, as a retriever the protocol can score."""

        def __init__(self, weights):
            self.total = sum(w * rows[f] for f, w in weights.items() if w)

        def score(self, texts, doc_indices=None):
            picked = self.total[[row_of[t] for t in texts]]
            return picked if doc_indices is None else picked[:, np.asarray(doc_indices)]

    def score(weights: dict[str, float]) -> float:
        return float(protocol.evaluate(Weighted(weights))[measure])

    weights = {f: (1.0 if f == whole else 0.0) for f in fields}
    best = score(weights)
    print(f"{len(queries)} queries, {len(protocol.doc_texts)} documents ({args.data} [{args.split}]); "
          f"choosing by {measure}; fields: {', '.join(fields)}")
    print(f"{whole} alone: {100 * best:.2f}")
    for sweep in range(1, 4):
        changed = False
        for field in fields:
            for value in GRID:
                trial = dict(weights, **{field: value})
                if not any(trial.values()) or trial == weights:
                    continue
                value_score = score(trial)
                if value_score > best + 1e-9:
                    best, weights, changed = value_score, trial, True
        print(f"pass {sweep}: {','.join(f'{f}:{w:g}' for f, w in weights.items())}  {measure} {100 * best:.2f}")
        if not changed:
            break
    print(f"contribution of each chosen field ({measure} lost when it is dropped):")
    for field, weight in weights.items():
        if weight and sum(1 for w in weights.values() if w) > 1:
            print(f"  {field:<22} weight {weight:g}: -{100 * (best - score(dict(weights, **{field: 0.0}))):.2f}")
    print(f"--set {args.retriever}.weights={','.join(f'{f}:{w:g}' for f, w in weights.items())}")


if __name__ == "__main__":
    main()
