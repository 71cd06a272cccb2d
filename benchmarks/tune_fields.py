"""Choose bm25-fields' weights on validation data, and report what each field contributes.

Each field's BM25 scores every validation query against every validation document once; a
weighting is then a weighted sum of those matrices, scored with the code-search protocol's
full-pool MRR@100 (structret.evaluation.metrics, as bench computes it). The search is
coordinate ascent from body alone: each field's weight in turn tried at every value of
GRID, the best kept, until a pass changes nothing. Then each chosen field is dropped in turn
(its weight set to 0) and the loss printed: the field's contribution. ::

    python benchmarks/tune_fields.py --data "codesearchnet:/work/data/code/ablation/*.jsonl.gz" --split valid

Prints the chosen weights as ``--set bm25-fields.weights=...`` takes them. Selection data only:
the test split is scored once, later, by ``structret bench`` with the chosen weights.
"""

from __future__ import annotations

import argparse

import numpy as np

GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a code-search dataset, FORMAT:PATH")
    parser.add_argument("--split", default="valid")
    args = parser.parse_args()

    from structret_lexical.fields import FIELDS, FieldBM25Retriever

    from structret.data import load_dataset
    from structret.evaluation import make_protocol
    from structret.evaluation.metrics import full_pool_ranks, mrr

    dataset = load_dataset(args.data, split=args.split)
    protocol = make_protocol(dataset)
    retriever = FieldBM25Retriever(weights={f: 1.0 for f in FIELDS})
    retriever.fit(protocol.doc_texts)
    scores = retriever.field_scores(protocol.queries)

    def score(weights: dict[str, float]) -> float:
        total = sum(w * scores[f] for f, w in weights.items() if w)
        return mrr(full_pool_ranks(lambda qi: total[qi], protocol.positives), 100)

    weights = {f: (1.0 if f == "body" else 0.0) for f in FIELDS}
    best = score(weights)
    print(f"{len(protocol.queries)} queries, {len(protocol.doc_texts)} documents ({args.data} [{args.split}])")
    print(f"body alone (plain bm25 over the whole text): MRR@100 {100 * best:.2f}")
    for sweep in range(1, 4):
        changed = False
        for field in FIELDS:
            for value in GRID:
                trial = dict(weights, **{field: value})
                if not any(trial.values()) or trial == weights:
                    continue
                value_score = score(trial)
                if value_score > best + 1e-9:
                    best, weights, changed = value_score, trial, True
        print(f"pass {sweep}: {','.join(f'{f}:{w:g}' for f, w in weights.items())}  MRR@100 {100 * best:.2f}")
        if not changed:
            break
    print("contribution of each chosen field (MRR@100 lost when it is dropped):")
    for field, weight in weights.items():
        if weight and sum(1 for w in weights.values() if w) > 1:
            print(f"  {field:<10} weight {weight:g}: -{100 * (best - score(dict(weights, **{field: 0.0}))):.2f}")
    print(f"--set bm25-fields.weights={','.join(f'{f}:{w:g}' for f, w in weights.items())}")


if __name__ == "__main__":
    main()
