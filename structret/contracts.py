"""What core calls on each plugin kind: one documented ``typing.Protocol`` per kind, and the rules
core checks at its seams.

A plugin is any object with these members (structural typing: no base class is needed, except
that objectives may inherit :class:`ObjectiveDefaults` for the optional hooks). Core calls
nothing that is not declared here and reads no plugin's private state. When a plugin breaks a
rule, core raises :class:`structret.errors.ContractError` naming the plugin and the rule (the
text of :data:`RULES`), never a traceback from inside the trainer.
``structret.testing.check_plugin(kind, name)`` runs the same rules against an installed plugin
with small fixtures: put it in a plugin's own tests.

The factories the hooks register (``structret.hookspecs``) return these objects.

Over 400 lines because every plugin kind's contract is on this one page, each documented
where it is declared, so a plugin author reads one file to learn what core calls.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Protocol, Sequence, runtime_checkable

from structret.errors import ContractError, StructretError
from structret.records import Dataset, Entity

if TYPE_CHECKING:
    import random

    import numpy as np
    import torch

    from structret.records import Query, Record
    from structret.records import Sequence as Linearized

ROLES = ("contrastive", "corruption", "auxiliary")

# What a backbone can say it does (Backbone.capabilities), and objectives ask for (Objective.needs:
# any one of them; empty = any backbone).
CAPABILITIES: dict[str, str] = {
    "encoder": "encode() and embed() give text vectors (every built-in backbone)",
    "seq2seq": "an encoder-decoder whose LM head predicts spans (t5, codet5): enable_lm() loads it",
    "mlm": "an encoder with a masked-LM head transformers can load (BERT-like): enable_lm() loads it",
    "structure-attention": "Khan & Jang's informed head: last_attention holds head 0's attention per informed "
                           "layer after a document forward (informed_layers > 0)",
    "aspect-slots": "MADRAL's aspect slots: last_aspect_states [batch, k, dim] after a document forward",
    "lora": "a LoRA adapter trains instead of the weights (adapter, merge_adapter in OPTIONAL)",
}

# Every rule core checks, in one place: the trainer's checks and structret.testing quote them.
RULES: dict[str, str] = {
    "objective-name": "an objective's name is non-empty and made of letters, digits, '-' and '_' (a '.' breaks "
                      "torch's nn.ModuleDict, which keys the objectives' heads by name)",
    "objective-role": f"an objective's role is one of {', '.join(ROLES)}",
    "objective-members": "",  # read off the Objective Protocols below
    "objective-check": "check(backbone) refuses a backbone it cannot train by raising structret.errors."
                       "ObjectiveError with a sentence for the user (any other exception is a bug in it)",
    "objective-needs": "an objective runs only on a backbone with at least one of the capabilities in its needs",
    "corrupt-labels": "corrupt() returns the passage batch as a dict of tensors with 'input_ids' and 'labels' "
                      "(-100 where nothing is predicted), one row per text unless the objective is standalone",
    "contrastive-loss": "a contrastive loss(queries, passages) returns a finite scalar tensor: the mean over the "
                        "global batch (the trainer multiplies it by the number of processes, as DDP averages)",
    "auxiliary-loss": "an auxiliary loss(backbone, passages, vectors, targets) returns (mean, count): a scalar "
                      "tensor, this process's mean over what it counted, and a scalar tensor, how many it counted",
    "loss-graph": "a loss is computed from the tensors the trainer passes in, so it carries their graph: not "
                  "detached, not rebuilt from .item() or under torch.no_grad()",
    "loss-mean": "an auxiliary loss's first value is a mean over what it counted, not a sum: the same passages "
                 "twice give the same mean and twice the count",
    "extractor-spans": "extract(text) returns Entity spans into the text: 0 <= start < end <= len(text) and "
                       "text[start:end] == entity.text",
    "linearizer-parents": "linearize(record) returns None or a Sequence whose parents (if any) give one index "
                          "per token, each -1 (the root) or a valid token index other than its own",
    "chunker-tiling": "chunk(text, path) returns units in order that hold every line that is not blank exactly "
                      "once, each unit's text its lines (blank lines between units belong to none)",
    "dataset-shape": "a reader returns a structret.records.Dataset whose qrels, pairs and negatives name only "
                     "queries and documents it holds, and whose stats count read = used + skipped",
    "backbone-encode": "encode(texts, kind=) returns a float32 matrix [len(texts), dim] of finite values",
    "backbone-train": "a backbone the trainer uses has every member of TrainableBackbone: tokenize (with "
                      "prefixes for query and document) gives a dict of tensors, embed() [n, dim] vectors, "
                      "train_forward() a finite scalar LM loss when given labels; "
                      "with capability seq2seq or mlm it also has enable_lm()",
    "index-search": "an index holds what was added (len) and search(queries, k) gives [n, min(k, len)] scores "
                    "best first (contracts.Index has the whole contract)",
    "retriever-score": "score(queries) gives a [len(queries), documents] matrix after fit(documents)",
}


def broken(kind: str, name: str, rule: str, detail: str = "") -> ContractError:
    """The error for ``kind`` ``name`` breaking ``rule``, naming the plugin that provides it."""
    who = ""
    # the registry that made the plugin, looked up rather than imported: it imports this module for
    # the contracts it checks plugins against, and a plugin made without it has no provenance to name
    registry_module = sys.modules.get("structret.registry")
    try:
        registry = registry_module.get_registry() if registry_module is not None else None
        if registry is not None and registry.has(kind, name):
            entry = registry.get(kind, name)
            who = f" (plugin '{entry.plugin}' from distribution '{entry.distribution}')"
    except Exception:  # the message matters more than the provenance
        pass
    return ContractError(f"{kind} '{name}'{who} breaks the plugin contract: {RULES[rule]}"
                         + (f"; {detail}" if detail else "") + f" [rule {rule}, structret/contracts.py]")


# --- backbones -----------------------------------------------------------------------------


@runtime_checkable
class Backbone(Protocol):
    """What encoding, indexing and search call: texts in, vectors out."""

    name: str  # the model id or path, recorded in index metadata
    dim: int
    capabilities: frozenset[str]  # "encoder", "seq2seq", "mlm", "structure-attention"

    def encode(self, texts: Sequence[str], *, kind: str = "document",
               batch_size: int = 32, show_progress: bool = False) -> "np.ndarray":
        """float32 matrix [len(texts), dim], row i for texts[i]; ``kind`` is "query" or "document"."""


class Tokenize(Protocol):
    """``backbone.tokenize``: the backbone's own tokenization, as ``encode`` uses it."""

    prefixes: dict[str, str]  # {"query": ..., "document": ...}: the text put before each kind

    def __call__(self, texts: list[str], *, kind: str, max_length: int) -> dict[str, "torch.Tensor"]: ...


@runtime_checkable
class TrainableBackbone(Backbone, Protocol):
    """What the trainer calls on top of :class:`Backbone`."""

    tokenizer: Any  # a transformers tokenizer; corruption objectives mask with it
    tokenize: Tokenize
    training_module: "torch.nn.Module"  # owns every trained parameter
    device: Any  # set by the trainer to the accelerator's device
    pooling: str  # recorded in the model's structret.json
    normalize: bool  # vectors are unit length

    def embed(self, batch: dict[str, "torch.Tensor"], *, kind: str = "document") -> "torch.Tensor":
        """Vectors with gradients for a tokenized batch; ``kind`` lets two towers pick their encoder."""

    def train_forward(self, batch: dict[str, "torch.Tensor"], labels: "torch.Tensor | None"
                      ) -> tuple["torch.Tensor", "torch.Tensor | None"]:
        """``(vectors, lm_loss)`` from one forward; ``lm_loss`` (the token mean) only with labels.
        A ``structure-attention`` backbone leaves the informed head's attention in
        ``last_attention`` after a document forward."""

    def save_pretrained(self, directory: Any) -> None:
        """A plain Hugging Face checkpoint the backbone's factory loads again as ``model=``."""


@runtime_checkable
class LanguageModelBackbone(TrainableBackbone, Protocol):
    """A trainable backbone with capability ``seq2seq`` or ``mlm``: corruption objectives run on it."""

    def enable_lm(self) -> None:
        """Attach the LM head a corruption objective trains; called once, before training."""


# --- objectives ----------------------------------------------------------------------------


@runtime_checkable
class Objective(Protocol):
    """What every objective has. ``check`` raises ``structret.errors.ObjectiveError`` with a
    sentence before training starts; ``needs`` lists capabilities of which the backbone must
    have one (the trainer refuses otherwise, after ``check``)."""

    name: str
    role: str  # one of ROLES
    needs: frozenset[str]
    standalone: bool  # True: it turns a passage into several rows, so it runs alone
    module: "torch.nn.Module | None"  # heads trained and checkpointed with the backbone, not saved in the model
    counts: Counter  # tallies behind report(); core restores it around gradient caching's counting pass

    def check(self, backbone: Any) -> None: ...

    def setup(self, examples: Sequence[Any], backbone: Any) -> None:
        """Once before training, with the training examples (e.g. value vocabularies)."""

    def targets(self, records: Sequence[Any]) -> Any:
        """Per-passage targets built with each batch (auxiliary objectives), or None."""

    def report(self) -> dict[str, int]:
        """What it counted, written to counts.json at the end (empty: nothing)."""


class ContrastiveObjective(Objective, Protocol):
    """role = "contrastive": scores queries against passages (sda, dr); one per run. Its loss is
    a mean, never a sum, and is computed from the vectors it is given (rule loss-graph)."""

    def loss(self, queries: "torch.Tensor", passages: "torch.Tensor") -> "torch.Tensor":
        """The global mean loss over gathered vectors: ``passages`` holds each query's positive,
        then its hard negatives, for every query of the global batch (rule contrastive-loss)."""


class CorruptionObjective(Objective, Protocol):
    """role = "corruption": corrupts passages for an LM loss (mep, span-mask, mlm); one per run. The
    batch is a dict of tensors with ``input_ids`` and ``labels`` (-100 where nothing is predicted),
    one row per text unless ``standalone``; tokenize with ``backbone.tokenize(texts, kind="document",
    max_length=...)`` and take mask and sentinel ids from ``backbone.tokenizer``."""

    def corrupt(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
                label_max_length: int, rngs: Sequence["random.Random"]) -> dict[str, "torch.Tensor"]:
        """The passage batch with ``labels`` (rule corrupt-labels); one forward of it gives the
        passage vectors and the LM loss. Draw randomness only from ``rngs`` (one per text), so
        1 or N processes, and a resumed run, corrupt alike. ``label_weights`` (optional): the
        objective normalised the loss itself (gradient caching then refuses it)."""


class AuxiliaryObjective(Objective, Protocol):
    """role = "auxiliary": a loss on the same passage forward (parent-attention, aspect-class); any
    number per run. Its mean is this process's mean over what it counted (rule auxiliary-loss)."""

    def loss(self, backbone: Any, passages: dict[str, "torch.Tensor"], vectors: "torch.Tensor",
             targets: Any) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``(mean, count)`` from the same passage forward (rule auxiliary-loss); the trainer
        weighs each process's mean by its share of the global count."""


class _Tallies:
    """A fresh Counter per instance on first read (a class-level Counter would be shared)."""

    def __get__(self, instance: Any, owner: type) -> Any:
        if instance is None:
            return self
        tallies: Counter[str] = Counter()
        instance.__dict__["counts"] = tallies
        return tallies


class ObjectiveDefaults:
    """The optional members of :class:`Objective` with their defaults; inherit it and define
    only what your objective does."""

    needs: ClassVar[frozenset[str]] = frozenset()  # empty: any backbone
    standalone: ClassVar[bool] = False
    module: Any = None
    counts = _Tallies()

    def setup(self, examples: Sequence[Any], backbone: Any) -> None:
        return None

    def targets(self, records: Sequence[Any]) -> Any:
        return None

    def report(self) -> dict[str, int]:
        return dict(self.counts)


def members(protocol: type) -> tuple[str, ...]:
    """The members ``protocol`` declares (attributes and methods, its Protocol bases' first), in
    the order written: the one list core checks a plugin against, so a contract is written once."""
    found: list[str] = []
    for klass in reversed(protocol.__mro__):
        if not getattr(klass, "_is_protocol", False) or klass.__name__ in ("Protocol", "Generic"):
            continue
        declared = [*getattr(klass, "__annotations__", {}),
                    *(name for name, value in vars(klass).items() if callable(value) or isinstance(value, property))]
        found += [name for name in declared if name not in found and (not name.startswith("_") or name == "__len__")]
    return tuple(found)


_ROLES = {"contrastive": ContrastiveObjective, "corruption": CorruptionObjective, "auxiliary": AuxiliaryObjective}
_ROLE_MEMBERS = {role: tuple(m for m in members(p) if m not in members(Objective)) for role, p in _ROLES.items()}
_MEMBERS = tuple(m for m in members(Objective) if m not in ("name", "role"))
_BY_MEMBER = {m: [r for r in _ROLES if m in _ROLE_MEMBERS[r]] for m in dict.fromkeys(sum(_ROLE_MEMBERS.values(), ()))}
RULES["objective-members"] = (
    f"an objective has {', '.join(members(Objective))} (inherit structret.plugin.ObjectiveDefaults for the "
    f"optional ones), plus " + " or ".join(f"{m} ({', '.join(roles)})" for m, roles in _BY_MEMBER.items()))



def check_objective(objective: Any, name: str) -> None:
    """An objective just built: its name, role and members (rules objective-*)."""
    own = getattr(objective, "name", None)
    if not isinstance(own, str) or not own or not all(c.isalnum() or c in "-_" for c in own):
        raise broken("objective", name, "objective-name", f"it is named {own!r}")
    role = getattr(objective, "role", None)
    if role not in ROLES:
        raise broken("objective", name, "objective-role", f"its role is {role!r}")
    missing = [m for m in (*_MEMBERS, *_ROLE_MEMBERS[role]) if not hasattr(objective, m)]
    if missing:
        raise broken("objective", name, "objective-members", f"it has no {', '.join(missing)}")


def check_needs(objective: Objective, backbone: Any) -> None:
    """Refuse an objective none of whose ``needs`` the backbone has (rule objective-needs)."""
    has = set(backbone.capabilities)
    if objective.needs and not objective.needs & has:
        raise broken("objective", objective.name, "objective-needs",
                     f"it needs one of {', '.join(sorted(objective.needs))}, and backbone '{backbone.name}' "
                     f"has {', '.join(sorted(has)) or 'none'}")


def _scalar(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.dim() == 0


def check_corrupted(objective: Objective, batch: Any, rows: int) -> None:
    """What ``corrupt`` returned for ``rows`` texts (rule corrupt-labels)."""
    import torch

    if not isinstance(batch, dict) or not all(isinstance(batch.get(k), torch.Tensor) for k in ("input_ids", "labels")):
        what = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise broken("objective", objective.name, "corrupt-labels", f"it returned {what}")
    if not objective.standalone and (len(batch["input_ids"]) != rows or len(batch["labels"]) != rows):
        raise broken("objective", objective.name, "corrupt-labels",
                     f"{rows} texts gave {len(batch['input_ids'])} rows of input_ids, {len(batch['labels'])} of labels")


def check_contrastive_loss(objective: Objective, loss: Any, *, finite: bool = False) -> None:
    """A contrastive loss: a scalar tensor (rule contrastive-loss). ``finite``: also check its
    value (a sync on a GPU; structret.testing does, the trainer does not, since a diverging run
    is not a broken plugin)."""
    import torch

    if not isinstance(loss, torch.Tensor):
        raise broken("objective", objective.name, "contrastive-loss", f"it returned a {type(loss).__name__}")
    if loss.dim():
        raise broken("objective", objective.name, "contrastive-loss", f"it returned shape {tuple(loss.shape)}")
    if finite and not bool(torch.isfinite(loss)):
        raise broken("objective", objective.name, "contrastive-loss", f"it returned {float(loss)}")
    _check_graph(objective, loss)


def run_check(objective: Objective, backbone: Any) -> None:
    """``objective.check(backbone)`` (rule objective-check): its ObjectiveError is the user's answer,
    any other exception a broken plugin, named as such."""
    try:
        objective.check(backbone)
    except StructretError:
        raise
    except Exception as exc:  # noqa: BLE001 - the plugin's bug, reported as one line naming it
        raise broken("objective", objective.name, "objective-check",
                     f"check() raised {type(exc).__name__}: {exc}") from exc


def _check_graph(objective: Objective, loss: Any) -> None:
    import torch

    if torch.is_grad_enabled() and not loss.requires_grad:
        raise broken("objective", objective.name, "loss-graph", "its loss has no gradient to train with")


def check_auxiliary_loss(objective: Objective, result: Any) -> tuple["torch.Tensor", "torch.Tensor"]:
    """An auxiliary loss's ``(mean, count)`` (rule auxiliary-loss)."""
    if not (isinstance(result, tuple) and len(result) == 2 and _scalar(result[0]) and _scalar(result[1])):
        shown = type(result).__name__ if not isinstance(result, tuple) else \
            "(" + ", ".join(type(r).__name__ for r in result) + ")"
        raise broken("objective", objective.name, "auxiliary-loss", f"it returned {shown}")
    _check_graph(objective, result[0])
    return result


def check_loss_mean(objective: AuxiliaryObjective, backbone: Any, texts: list[str], rows: list[Any]) -> None:
    """Rule loss-mean: the passages once and twice, dropout off, give one mean and twice the count."""
    import torch

    module = backbone.training_module
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            found = []
            for times in (1, 2):
                batch = backbone.tokenize(texts * times, kind="document", max_length=64)
                vectors, _ = backbone.train_forward(batch, None)
                found.append(objective.loss(backbone, batch, vectors, objective.targets(rows * times)))
    finally:
        module.train(was_training)
    (once, n1), (twice, n2) = ((float(m), float(c)) for m, c in found)
    if n1 > 0 and not (abs(twice - once) <= 1e-3 * max(1.0, abs(once)) and abs(n2 - 2 * n1) <= 1e-6 * max(1.0, n1)):
        raise broken("objective", objective.name, "loss-mean", f"once: mean {once:.6g} over {n1:g}; twice: mean {twice:.6g} "
                                                     f"over {n2:g}")


def check_entities(extractor: str, text: str, entities: Any) -> list["Entity"]:
    """An extractor's spans for ``text`` (rule extractor-spans), as a list."""
    found = list(entities)
    for e in found:
        if not (isinstance(e, Entity) and 0 <= e.start < e.end <= len(text) and text[e.start:e.end] == e.text):
            shown = repr(e) if isinstance(e, Entity) else f"a {type(e).__name__} ({e!r:.80})"
            raise broken("extractor", extractor, "extractor-spans", f"{shown} in a text of {len(text)} characters")
    return found


# --- structure: extractors and linearizers -------------------------------------------------


@runtime_checkable
class Extractor(Protocol):
    """Finds the entities masked entity prediction masks and the serve page marks."""

    def extract(self, text: str, language: str | None = None) -> "list[Entity]":
        """Entity spans into ``text`` (rule extractor-spans), never token positions."""


@runtime_checkable
class Linearizer(Protocol):
    """Turns a record into tokens (``structret.records.Sequence``: ``tokens``, and ``parents`` with one
    index per token or None); with ``text(record)`` (OPTIONAL) it can be a run's text_format."""

    def linearize(self, record: "Record") -> "Linearized | None":
        """Tokens and optionally parents (rule linearizer-parents); None: cannot (skipped, counted)."""


# --- data ----------------------------------------------------------------------------------


class DatasetReader(Protocol):
    """``reader(path, *, split=None, **options) -> Dataset``: malformed rows skipped and counted
    in ``Dataset.stats`` (with file:line), unreadable input a ``DataError`` (rule dataset-shape)."""

    def __call__(self, path: str, *, split: str | None = None, **options: Any) -> "Dataset": ...


@runtime_checkable
class Miner(Protocol):
    """One programming language for ``structret mine``: ``functions`` raises SyntaxError for a
    file it cannot parse (skipped and counted)."""

    extensions: Sequence[str]

    def functions(self, source: str, path: str) -> list[Any]:
        """``structret.mining.MinedFunction`` rows of one file."""


class Chunker(Protocol):
    """How a project's files are cut into search units (``structret index SOURCE``): every line of a file
    it reads in exactly one ``structret.records.Unit``, in order (``tests/test_chunker.py`` checks it)."""

    def language(self, path: str, head: bytes = b"") -> str | None:
        """The language of the file ``path`` (``head``: its first bytes), ``"text"``, or None: not read."""

    def chunk(self, text: str, path: str, language: str | None = None) -> list[Any]:
        """The units of one file's text; ValueError or SyntaxError for a file it cannot cut."""


# --- search: indexes and retrievers --------------------------------------------------------


@runtime_checkable
class Index(Protocol):
    """A vector index. ``tests/test_index_contract.py`` checks every registered one against this.

    - ``Index(dim, metric="ip", **options)``: ``metric`` is ``"ip"`` (scores are inner
      products) or ``"cosine"`` (inner products of unit vectors; scale does not matter).
    - ``add(ids, vectors)``: string ids (any unicode), one per row of a ``[n, dim]`` matrix;
      several adds equal one. A repeated id, a count mismatch, a wrong dimension or a NaN
      raises ``ValueError`` (``structret.search.saved.IndexInputError``) naming the problem, and
      leaves the index as it was. Zero rows are a no-op.
    - ``search(queries, k)``: ``(scores, ids)``, scores float32 ``[n, k']`` best first with
      ``k' = min(k, len(self))`` for every row (an empty index gives ``[n, 0]``), each score
      the metric's value for the id beside it. ``[0, dim]`` queries give an empty result;
      ``k < 1``, a 1-d vector or a wrong dimension raise ``ValueError``.
    - ``exact`` (optional attribute): ``True`` if search returns the true top k (recall@10
      must be 1.0); an index without it is approximate (recall@10 >= 0.9 on unit vectors with
      its default options).
    - ``save(path, meta)`` through ``structret.artifacts.atomic_dir``: ``structret.json``
      (``structret.search.saved.base_meta``, the caller's ``meta`` kept) plus checksummed files;
      an interrupted save leaves the previous index. Classmethod ``load(path)`` gives the
      same results as the saved index (an exact one: as before saving) and rejects a
      truncated file; using a loaded index never changes the saved files (an index kept on a
      server, like ``milvus`` with ``uri=``, points at data that is not a snapshot).
    - ``close()`` (optional, :class:`HasClose` in :data:`OPTIONAL`): release connections or working files.
    - ``remove(ids)`` (optional, :class:`HasRemove` in :data:`OPTIONAL`): see there. An index with it can
      be updated in place (``structret index --remove``); the contract tests run over it.
    """

    dim: int
    metric: str

    def add(self, ids: Sequence[str], vectors: "np.ndarray") -> None: ...

    def search(self, queries: "np.ndarray", k: int) -> tuple["np.ndarray", list[list[str]]]:
        """Scores [n, k'] (best first) and the matching ids; k' = min(k, len(self))."""

    def save(self, path: str, meta: dict[str, Any] | None = None) -> None: ...

    def __len__(self) -> int: ...


@runtime_checkable
class Retriever(Protocol):
    """A whole retriever that reads text itself (BM25): fitted on the documents, scores every one."""

    def fit(self, docs: Sequence[str]) -> None:
        """Index the collection; document i is ``docs[i]``."""

    def score(self, queries: Sequence[str], doc_indices: "np.ndarray | None" = None) -> "np.ndarray":
        """Scores [len(queries), n] against all fitted documents, or those in ``doc_indices``."""


# --- optional members ----------------------------------------------------------------------
# What core reads from a plugin when the plugin has it, and does without when it does not: each
# member a small runtime_checkable Protocol, asked with isinstance (so mypy checks the call that
# follows), listed by kind in OPTIONAL so every member core may touch is on this page. Each one's
# docstring is its documentation (docs/plugins.md is generated from it).


@runtime_checkable
class HasMaxLength(Protocol):
    """tokens per text; shown in a results table's notes"""

    max_length: int | None


@runtime_checkable
class HasPooling(Protocol):
    """how the vector is made (cls, mean, first-decoder-position); notes and structret.json"""

    pooling: str | None


@runtime_checkable
class HasNormalize(Protocol):
    """whether vectors are unit length; notes and structret.json"""

    normalize: bool | None


@runtime_checkable
class HasDtype(Protocol):
    """the encoding precision it resolved (None: fp32); notes"""

    dtype: str | None


@runtime_checkable
class HasLmHeadIsNew(Protocol):
    """after enable_lm(): True when its LM head did not come from the checkpoint (it starts random), which is
    what lm_warmup = auto warms up"""

    lm_head_is_new: bool


@runtime_checkable
class HasLmHeadParameters(Protocol):
    """lm_head_parameters() -> list of the LM head's own parameters (not the encoder's, not a tied input
    embedding): all that LM-head warm-up trains"""

    def lm_head_parameters(self) -> list[Any]: ...


@runtime_checkable
class HasTextPrefixes(Protocol):
    """{'query': str, 'document': str} put before each text; structret export writes them as
    sentence-transformers prompts and into the ONNX export"""

    text_prefixes: dict[str, str] | None


@runtime_checkable
class HasSource(Protocol):
    """where its weights were loaded from (a folder or hub id); an ONNX export records it (default: name)"""

    source: str


@runtime_checkable
class HasPooledEncoder(Protocol):
    """pooled_encoder() -> structret.records.PooledEncoder | str: its vectors as one encoder forward and CLS
    or mean pooling, which structret export writes; a str says why its vectors are not that (e.g. something
    else is fused in), and export refuses it saying so. A backbone without it is not exported"""

    def pooled_encoder(self) -> Any: ...


@runtime_checkable
class HasAdapter(Protocol):
    """the settings of a LoRA adapter trained instead of the whole encoder ({'r', 'alpha', 'dropout',
    'targets'}; None: none); structret export merges it (merge_adapter) before writing"""

    adapter: dict[str, Any] | None


@runtime_checkable
class HasMergeAdapter(Protocol):
    """merge_adapter(): fold the adapter into the base weights, the same vectors from a plain model that loads
    without peft; structret export calls it and checks the vectors"""

    def merge_adapter(self) -> None: ...


@runtime_checkable
class HasOnnxTwin(Protocol):
    """onnx_twin() -> str | None: a folder of structret export --format onnx of its current weights (fp32
    within cosine 0.9999 of its own vectors), made once; None where it cannot be. structret index SRC records
    it, and re-runs encode edited functions with it, without importing torch"""

    def onnx_twin(self) -> str | None: ...


@runtime_checkable
class HasFingerprint(Protocol):
    """fingerprint() -> str: a hash of everything that decides its vectors (weights, tokenizer, settings);
    equal fingerprints must mean equal vectors. structret bench keeps encoded vectors under it
    (structret.vector_cache); without it nothing is cached"""

    def fingerprint(self) -> str: ...


@runtime_checkable
class HasLmWarmupOptions(Protocol):
    """a corruption objective's structret.options.LMWarmupOptions: how many steps the trainer trains the LM
    head alone first (structret.training.warmup)"""

    lm_warmup_options: Any


@runtime_checkable
class HasContrastiveInput(Protocol):
    """a corruption objective's 'masked' (default: the contrastive loss embeds the corrupted passage, one
    forward) or 'unmasked' (a second forward of the clean one)"""

    contrastive_input: str


@runtime_checkable
class HasEntityExtractors(Protocol):
    """entity_extractors() -> dict[str, str]: after training, the extractor whose entities it trained on, by
    the language of the records ('' for records without one, such as products); the run records it in
    structret.json ('entities') and structret serve marks hits with it"""

    def entity_extractors(self) -> dict[str, str]: ...


@runtime_checkable
class HasSettings(Protocol):
    """settings() -> str: what changes its numbers, for a results table's notes"""

    def settings(self) -> str: ...


@runtime_checkable
class HasFormatDocument(Protocol):
    """format_document(record) -> str: how it reads a record (default: record.text())"""

    def format_document(self, record: Any) -> str: ...


@runtime_checkable
class HasSplit(Protocol):
    """split(text) -> dict: one function's fields, at least 'name' and 'calls' (the names it calls, space
    separated): what a whole-project benchmark reads its call graph from"""

    def split(self, text: str) -> dict[str, str]: ...


@runtime_checkable
class HasFormatQuery(Protocol):
    """format_query(query) -> str: how it reads a query (default: query.text)"""

    def format_query(self, query: Any) -> str: ...


@runtime_checkable
class HasSearch(Protocol):
    """search(queries, k) -> (scores [nq, k'], document positions [nq, k']), best first: the top k of each
    query; a retriever with search, save and load can be an index's lexical side"""

    def search(self, queries: Sequence[str], k: int) -> tuple[Any, Any]: ...


@runtime_checkable
class HasSave(Protocol):
    """save(directory): write the fitted retriever into directory (created if missing), with every option
    that changes how it reads text; structret index --lexical checksums what it writes"""

    def save(self, directory: Any) -> None: ...


@runtime_checkable
class HasLoad(Protocol):
    """load(directory) -> retriever, on the registered class: the retriever save() wrote, fitted"""

    def load(self, directory: Any) -> Any: ...


@runtime_checkable
class HasUpdate(Protocol):
    """update(rows) -> bool: become the fit of a new corpus reading only its new documents (rows: per
    document, the position of one it holds, or a new one's text), scoring as fit would; False when it cannot
    (then it is fitted). An index's update (structret index SRC's re-runs) uses it"""

    def update(self, rows: Sequence[Any]) -> bool: ...


@runtime_checkable
class HasTerms(Protocol):
    """terms(texts, kind) -> list[list[str]]: the terms its BM25 indexes for each text (kind 'document': the
    texts read together, as fit reads them; 'query'), each a word without spaces: what an index holding a
    BM25 of its own searches a query by, so its analyzer sees the same terms. Needs no fit"""

    def terms(self, texts: Sequence[str], kind: str = "document") -> list[list[str]]: ...


@runtime_checkable
class HasFields(Protocol):
    """fields(texts) -> {field: (weight, terms per text)}: the fields a score sums, each with its weight and
    each document's terms (the texts read together, as fit reads them): what an index holding a BM25 of its
    own is given (index.set_texts) and weighs (index.search_lexical), so that its ranking is this retriever's.
    Needs no fit"""

    def fields(self, texts: Sequence[str]) -> dict[str, tuple[float, list[list[str]]]]: ...


@runtime_checkable
class HasFailures(Protocol):
    """a Counter of what it could not read, by reason (structret extract and structret linearize print it)"""

    failures: Counter


@runtime_checkable
class HasText(Protocol):
    """text(record) -> str | None: the record as text; only a linearizer with it can be a text_format"""

    def text(self, record: Any) -> str | None: ...


@runtime_checkable
class HasLayout(Protocol):
    """fields(text) -> structret.records.Layout | None: a text its text() wrote, read back into named fields
    (a title, aspects) and a body, spans into the text; structret serve shows a hit with them. None when the
    text does not fit (the whole text is shown as it is)"""

    def fields(self, text: str) -> Any: ...


@runtime_checkable
class HasRemove(Protocol):
    """remove(ids): drop every id in the sequence from the index, so len() shrinks and no search returns them;
    an id it does not hold, or one listed twice, raises ValueError (structret.search.saved.IndexInputError)
    naming it and removes nothing; [] is a no-op. A removed id may be added again, with any vector. save()
    after remove() saves the index without them, and a loaded index removes alike (structret index --remove
    needs it)"""

    def remove(self, ids: Sequence[str]) -> None: ...


@runtime_checkable
class HasClose(Protocol):
    """close(): release connections or working files (a server's collection, a temporary copy); called when
    core is done with the index"""

    def close(self) -> None: ...


@runtime_checkable
class HasSetTexts(Protocol):
    """set_texts(ids, fields): give ids already added their lexical fields for the index's own BM25 (fields:
    {name: one text per id, the terms of a retriever's fields(), space separated}; each field a BM25 of its
    own; a later call replaces every given id's fields), kept with the vectors by save and load, and dropped
    by remove. With search_lexical it makes an index hold a hybrid's lexical side itself
    (structret.search.lexical)"""

    def set_texts(self, ids: Sequence[str], fields: dict[str, list[str]]) -> None: ...


@runtime_checkable
class HasSearchLexical(Protocol):
    """search_lexical(texts, k, weights) -> (scores [n, k'], ids): the top k of each query (its terms, space
    separated) by the weighted sum of the fields' BM25 scores (weights: {field: weight}), best first, rows
    padded with -inf past what matched. Structret fuses them with the vectors' top k, as with a lexical side
    of its own"""

    def search_lexical(self, texts: Sequence[str], k: int, weights: dict[str, float]) -> tuple[Any, Any]: ...


@runtime_checkable
class HasStandardMethods(Protocol):
    """a language's special method names, dropped from a corpus like constructors"""

    standard_methods: Any


@runtime_checkable
class HasBlankDocstrings(Protocol):
    """blank_docstrings(source, path) -> str: the source with every mined function's docstring (or doc
    comment) turned to spaces, line breaks kept, so the code and its line numbers stay; what a whole-project
    benchmark searches, its docstrings the queries"""

    def blank_docstrings(self, source: str, path: str) -> str: ...


OPTIONAL: dict[str, tuple[type, ...]] = {
    "backbone": (HasMaxLength, HasPooling, HasNormalize, HasDtype, HasLmHeadIsNew, HasLmHeadParameters,
                 HasTextPrefixes, HasSource, HasPooledEncoder, HasAdapter, HasMergeAdapter, HasOnnxTwin,
                 HasFingerprint),
    "objective": (HasLmWarmupOptions, HasContrastiveInput, HasEntityExtractors),
    "retriever": (HasSettings, HasFormatDocument, HasSplit, HasFormatQuery, HasSearch, HasSave, HasLoad, HasUpdate,
                  HasTerms, HasFields),
    "extractor": (HasFailures,),
    "linearizer": (HasFailures, HasText, HasLayout),
    "index": (HasRemove, HasClose, HasSetTexts, HasSearchLexical),
    "miner": (HasStandardMethods, HasBlankDocstrings),
}


def optional_member(protocol: type) -> str:
    """The one member an OPTIONAL protocol declares (``HasFingerprint`` -> ``fingerprint``)."""
    (member,) = members(protocol)
    return member


# --- evaluation ----------------------------------------------------------------------------


class EvaluationProtocol(Protocol):
    """What core calls on an evaluation protocol (``register_protocols`` in structret/hookspecs.py).

    Built as ``protocol(dataset, limit)``: ``dataset`` declares the task the protocol is
    registered under; ``limit`` keeps the first N queries (or pairs), ``None`` all.
    Construction selects the queries and documents and may raise
    ``structret.evaluation.EvaluationError`` for data it cannot evaluate.

    Then, once per system: ``bind(document, query)`` sets ``doc_texts`` and the query
    texts as that system reads records (a run trained on a product template reads items
    through it); the system is fitted on ``doc_texts``; ``query_texts()`` are encoded in
    one pass; ``evaluate(retriever)`` returns ``{column: value}`` for every name in
    ``columns`` (``None``: not applicable to this data, printed n/a; extra keys, such as
    ``csn_batches``, are kept in the row). ``retriever.score(queries, doc_indices=None)``
    scores against ``doc_texts`` by position.
    """

    name: str  # the table's title, e.g. "code search"
    columns: list[str]  # the measures, in table order; the keys evaluate() returns
    notes: list[str]  # sentences printed under the table: how the numbers were computed
    sizes: dict[str, int]  # what was evaluated, e.g. {"queries": 500, "documents": 10000}
    doc_texts: list[str]  # the documents to fit the retriever on; set by bind()

    def bind(self, document: Callable[[Record], str], query: Callable[[Query], str]) -> None: ...

    def query_texts(self) -> list[str]: ...

    def evaluate(self, retriever: Retriever) -> dict[str, Any]: ...


# What a plugin of each kind is: core checks every object a factory returns against it (registry).
# A dataset reader returns a structret.records.Dataset, whose fields are checked instead; an
# objective is checked by the objective-* rules (check_objective), which say more.
PROTOCOLS: dict[str, type] = {
    "backbone": Backbone, "index": Index, "retriever": Retriever, "miner": Miner, "chunker": Chunker,
    "extractor": Extractor, "linearizer": Linearizer, "protocol": EvaluationProtocol,
}


def shape(kind: str) -> tuple[str, ...]:
    """What an object a ``kind`` factory returns must have: its contract's members, or for a
    reader the fields a Dataset cannot do without (the registry checks each object it makes)."""
    if kind == "dataset":
        return tuple(f.name for f in dataclasses.fields(Dataset)
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    protocol = PROTOCOLS.get(kind)
    return members(protocol) if protocol is not None else ()
