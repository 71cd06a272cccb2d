"""The numbers behind SANTA's Figures 3 and 4: the ranking probability of each query's own
document, how often it ranks first, how close matched pairs are compared with mismatched ones
(in the full space and in a 2-D projection); and the one scoring every model is measured with.

numpy is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

from structret.errors import StructretError

SIMILARITIES = ("cos", "dot")
# minilm-code's [sda] scoring: MiniLM's unit vectors need the temperature for a softmax that is not flat
DEFAULT_SCORING = ("cos", 0.05)


def ranking_probabilities(queries, documents, positives: Sequence[int], *, similarity: str = "cos",
                          temperature: float = 0.05):
    """p(positive | query) for each query row: the softmax of its scores against every document
    row, divided by ``temperature``, taken at the index ``positives`` gives (float64)."""
    import numpy as np

    if similarity not in SIMILARITIES:
        raise StructretError(f"similarity {similarity!r}: use one of {', '.join(SIMILARITIES)}.")
    if not temperature > 0:
        raise StructretError(f"temperature must be positive, got {temperature}.")
    q = np.asarray(queries, dtype=np.float64)
    d = np.asarray(documents, dtype=np.float64)
    if similarity == "cos":
        q, d = _unit(q), _unit(d)
    scores = q @ d.T / temperature
    scores -= scores.max(axis=1, keepdims=True)  # exp never overflows
    log_p = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    rows = np.arange(len(q))
    return np.exp(log_p[rows, np.asarray(positives)])


def alignment(queries, codes, *, seed: int = 0) -> tuple[float, float]:
    """(mean cosine of matched rows, mean cosine of mismatched rows): row i of ``queries`` with
    row i of ``codes``, then with the code of another row (a random cyclic shift of a shuffled
    order, so no row meets its own code)."""
    import numpy as np

    q, c = _unit(np.asarray(queries, dtype=np.float64)), _unit(np.asarray(codes, dtype=np.float64))
    n = len(q)
    if n < 2:
        raise StructretError("alignment needs at least 2 pairs to have a mismatched one.")
    order = np.random.default_rng(seed).permutation(n)
    other = np.empty(n, dtype=int)
    other[order] = np.roll(order, 1)  # each row takes the code of the row before it in the shuffle
    return float((q * c).sum(1).mean()), float((q * c[other]).sum(1).mean())


def own_nearest(points, pairs: int) -> float:
    """Fraction of docstrings (the first ``pairs`` rows) whose nearest code (the next ``pairs``
    rows) in ``points`` is their own: the 2-D picture's alignment as a number."""
    import numpy as np

    docs, codes = np.asarray(points[:pairs]), np.asarray(points[pairs:2 * pairs])
    distances = ((docs[:, None, :] - codes[None, :, :]) ** 2).sum(-1)
    return float((distances.argmin(1) == np.arange(pairs)).mean())


def positive_first(queries, documents, positives, similarity: str) -> float:
    import numpy as np

    q, d = np.asarray(queries, dtype=np.float64), np.asarray(documents, dtype=np.float64)
    if similarity == "cos":
        q, d = _unit(q), _unit(d)
    scores = q @ d.T
    own = scores[np.arange(len(q)), positives]
    # ties count against the model, as the full-pool MRR does
    return float(((scores >= own[:, None]).sum(1) == 1).mean())


def _unit(x):
    import numpy as np

    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def recorded_scoring(model) -> tuple[str, float] | None:
    """(similarity, temperature) of the contrastive objective the model's run trained with, or None."""
    recipe = getattr(model, "recipe", None) or {}
    plugins = recipe.get("plugins") or {}
    for name in str(recipe.get("objective", "")).split("+"):
        name = name.split("*")[-1].strip()
        options = plugins.get(name) or {}
        if "temperature" in options and "similarity" in options:
            return str(options["similarity"]), float(options["temperature"])
    return None


def resolve_scoring(models: Sequence[tuple[str, Any]], similarity: str | None = None,
                    temperature: float | None = None) -> tuple[str, float, str]:
    """One (similarity, temperature) for every model, so their distributions are comparable,
    and a sentence saying where it came from: given, else the one the trained runs record,
    else minilm-code's (cos, 0.05)."""
    recorded = {label: found for label, model in models if (found := recorded_scoring(model)) is not None}
    distinct = sorted(set(recorded.values()))
    if len(distinct) > 1 and (similarity is None or temperature is None):
        runs = "; ".join(f"{label}: {s}/{t:g}" for label, (s, t) in recorded.items())
        raise StructretError(f"the runs were trained with different scorings ({runs}); pick the one to plot with "
                             f"--similarity and --temperature.")
    if distinct:
        base, source = distinct[0], f"recorded by {', '.join(recorded)}"
    else:
        base, source = DEFAULT_SCORING, "no model records one: minilm-code's sda scoring"
    given = [what for what, value in (("similarity", similarity), ("temperature", temperature)) if value is not None]
    if given:
        source = f"{' and '.join(given)} given" + (f"; the rest {source}" if len(given) < 2 else "")
    return similarity or base[0], float(temperature if temperature is not None else base[1]), source
