"""Check a plugin against its contract (structret/contracts.py), from the plugin's own tests::

    from structret.testing import check_plugin

    def test_my_objective_keeps_the_contract():
        check_plugin("objective", "margin-nce", margin=0.3)

``check_plugin(kind, name, **options)`` creates the installed plugin with ``options`` and runs
it on small built-in fixtures: objectives on a tiny random BERT (and T5) saved and loaded back
through ``from_pretrained``, exactly as ``--model DIR`` loads weights; extractors and
linearizers on a few code and product records; indexes and retrievers on random vectors and
short texts; chunkers on a few files (every line that is not blank in one unit); a dataset reader on
the ``path`` you pass. A broken rule raises
:class:`structret.errors.ContractError` naming the plugin and the rule. The tiny-model builders
are public too (``build_tiny_bert``, ``build_tiny_t5``), for tests that need a model offline.

Over 400 lines because it holds one contract check for each kind of plugin, side by side.
"""

from __future__ import annotations

import random
import string
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from structret import defaults
from structret.contracts import (
    HasClose,
    Backbone,
    LanguageModelBackbone,
    Objective,
    TrainableBackbone,
    broken,
    check_auxiliary_loss,
    check_contrastive_loss,
    check_corrupted,
    check_entities,
    check_loss_mean,
    check_needs,
    run_check,
)
from structret.errors import ContractError, DataError, ObjectiveError, PluginError, StructretError
from structret.records import CodeRecord, Dataset, ItemRecord
from structret.registry import get_registry

WORDS = (
    "the a an function method class returns adds sums two numbers list sort sorted string parse "
    "file open read write value key dict index search query code python go java def return self "
    "import for in if else while print range len append split join true false none error raise"
).split()
CODE = [
    "def add(a, b): return a + b",
    "for i in range(10): print(i)",
    "class Stack:\n    def push(self, x): self.items.append(x)",
    "if key in table: return table[key]",
    "with open(path) as f: return f.read().split()",
]


def corpus(n: int = 300, seed: int = 0) -> list[str]:
    """Sentences and code snippets to train the tiny tokenizers on (and to encode)."""
    rng = random.Random(seed)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 24))) for _ in range(n)]
    return sentences + CODE


def _wordpiece_vocab(texts: list[str], specials: list[str], normalizer: Any, pre_tokenizer: Any,
                     size: int) -> dict[str, int]:
    """The same WordPiece vocabulary in every process: the specials, every character (of the
    texts, and ASCII's) alone and as a ``##`` continuation, then whole words, most frequent
    first. (tokenizers' WordPieceTrainer breaks ties between merges in hash order, so its
    vocabulary, and with it every test on the tiny BERT, changed from one build to the next.)"""
    counts = Counter(word for text in texts
                     for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    ascii_chars = set(string.ascii_lowercase + string.digits + string.punctuation)
    chars = sorted({c for word in counts for c in word} | ascii_chars)
    vocab = [*specials, *chars, *(f"##{c}" for c in chars)]
    known = set(vocab)
    vocab += [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if w not in known]
    return {token: i for i, token in enumerate(vocab[:size])}


def build_tiny_bert(directory: Path, *, seed: int = 0) -> Path:
    """A random 2-layer BERT (hidden 32) with its MLM head and a WordPiece tokenizer, saved in ``directory``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    tok = Tokenizer(models.WordPiece(_wordpiece_vocab(corpus(), specials, normalizer, pre_tokenizer, 300),
                                     unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512,
    )
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    # saved with its MLM head, like real BERT checkpoints; AutoModel drops the head on load
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return Path(directory)


def build_tiny_t5(directory: Path, *, seed: int = 0) -> Path:
    """A random 2-layer T5 (d_model 32) with a word-level tokenizer (no sentinels), saved in ``directory``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    specials = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2 as in T5
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus(), trainers.WordLevelTrainer(special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )
    config = T5Config(  # type: ignore[call-arg]  # extra config kwargs are accepted at run time, not in its typing
        vocab_size=len(tokenizer), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    torch.manual_seed(seed)
    T5ForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return Path(directory)


# --- fixtures ------------------------------------------------------------------------------

_MODELS: dict[str, Path] = {}


def _tiny(kind: str) -> Path:
    """A tiny model directory, built once per process."""
    if kind not in _MODELS:
        directory = Path(tempfile.mkdtemp(prefix=f"structret-tiny-{kind}-"))
        _MODELS[kind] = (build_tiny_bert if kind == "bert" else build_tiny_t5)(directory)
    return _MODELS[kind]


def records() -> list[Any]:
    """Four Python functions and four products with brand and color aspects."""
    code = [CodeRecord(f"c{i}", text, "python", docstring=doc, func_name=text[4:text.index("(")])
            for i, (doc, text) in enumerate([
                ("add two numbers", "def add(a, b):\n    return a + b"),
                ("read a file", "def read_file(path):\n    return open(path).read()"),
                ("sort a list", "def sort_list(values):\n    return sorted(values)"),
                ("print a name", "def greet(name):\n    print('hello', name)"),
            ])]
    items = [ItemRecord(f"i{i}", title=f"{brand} {color} {thing}", content=f"A {color} {thing} made by {brand}.",
                        bullets=[f"{color} {thing}"], aspects={"brand": [brand], "color": [color]})
             for i, (brand, color, thing) in enumerate([
                 ("acme", "red", "mug"), ("acme", "blue", "lamp"), ("globex", "red", "chair"), ("globex", "blue", "desk"),
             ])]
    return code + items


def _candidates() -> list[tuple[str, dict[str, Any]]]:
    """Backbones an objective may be checked on: encoder+mlm, seq2seq, structure-attention."""
    bert = str(_tiny("bert"))
    return [(defaults.ENCODER, {"model": bert}), (defaults.SEQ2SEQ, {"model": str(_tiny("t5"))}),
            (defaults.ENCODER, {"model": bert, "informed_layers": 1})]


def _backbone_for(objective: Objective, name: str) -> Backbone:
    why = []
    for backbone_name, options in _candidates():
        backbone = get_registry().create("backbone", backbone_name, **options)
        try:
            run_check(objective, backbone)
            check_needs(objective, backbone)
        except (ObjectiveError, ContractError) as exc:
            why.append(f"{backbone_name} {sorted(backbone.capabilities)}: {exc}")
            continue
        return backbone
    raise PluginError(f"objective '{name}': no fixture backbone fits it; pass backbone=... to check_plugin. "
                      + " | ".join(why))


# --- the checks per kind -------------------------------------------------------------------


def _check_objective(name: str, options: dict[str, Any], backbone: Backbone | None = None) -> dict[str, Any]:
    import torch

    from structret.training.examples import Example

    objective = get_registry().create("objective", name, **options)  # the objective rules checked there
    if backbone is None:
        backbone = _backbone_for(objective, name)
    else:
        run_check(objective, backbone)
        check_needs(objective, backbone)
    if not isinstance(backbone, TrainableBackbone):
        raise broken("backbone", backbone.name, "backbone-train", "it lacks members of TrainableBackbone")
    rows = records()
    texts = [r.text() for r in rows]
    queries = [r.docstring if isinstance(r, CodeRecord) else r.bullets[0] for r in rows]
    objective.setup([Example([q], [t], record=r) for q, t, r in zip(queries, texts, rows)], backbone)
    if objective.module is not None and not isinstance(objective.module, torch.nn.Module):
        raise broken("objective", name, "objective-members", "its module is not a torch.nn.Module")
    if objective.role == "corruption":
        if not isinstance(backbone, LanguageModelBackbone):
            raise broken("backbone", backbone.name, "backbone-train", "it has no enable_lm()")
        backbone.enable_lm()
        rngs = [random.Random(i) for i in range(len(texts))]
        batch = objective.corrupt(texts, rows, backbone, max_length=64, label_max_length=32, rngs=rngs)
        check_corrupted(objective, batch, len(texts))
        labels = batch.pop("labels")
        _, lm_loss = backbone.train_forward(batch, labels)
        if not (isinstance(lm_loss, torch.Tensor) and lm_loss.dim() == 0 and bool(torch.isfinite(lm_loss))):
            raise broken("backbone", backbone.name, "backbone-train", f"train_forward gave the LM loss {lm_loss!r}")
        lm_loss.backward()
    elif objective.role == "contrastive":
        # each query's positive, then one hard negative (the next passage)
        passages = [p for i, t in enumerate(texts) for p in (t, texts[(i + 1) % len(texts)])]
        q = backbone.embed(backbone.tokenize(queries, kind="query", max_length=32), kind="query")
        p = backbone.embed(backbone.tokenize(passages, kind="document", max_length=64), kind="document")
        loss = objective.loss(q, p)
        check_contrastive_loss(objective, loss, finite=True)
        loss.backward()
    else:
        batch = backbone.tokenize(texts, kind="document", max_length=64)
        vectors, _ = backbone.train_forward(batch, None)
        mean, count = check_auxiliary_loss(objective, objective.loss(backbone, batch, vectors, objective.targets(rows)))
        if not bool(torch.isfinite(mean)):
            raise broken("objective", name, "auxiliary-loss", f"its mean is {float(mean)}")
        if mean.requires_grad:
            mean.backward()
        check_loss_mean(objective, backbone, texts, rows)
    report = objective.report()
    if not isinstance(report, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in report.items()):
        raise broken("objective", name, "objective-members", f"report() returned {report!r}, not {{str: int}}")
    return {"backbone": backbone.name, "report": report}


def _check_backbone(name: str, options: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    backbone = get_registry().create("backbone", name, **options)
    if not isinstance(backbone, Backbone) or not isinstance(backbone.capabilities, frozenset):
        raise broken("backbone", name, "backbone-encode", "it lacks name, dim, capabilities (a frozenset) or encode")
    texts = [r.text() for r in records()]
    for kind in ("query", "document"):
        vectors = backbone.encode(texts, kind=kind, batch_size=4)
        if not (isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
                and vectors.shape == (len(texts), backbone.dim) and np.isfinite(vectors).all()):
            raise broken("backbone", name, "backbone-encode",
                         f"kind={kind} gave {type(vectors).__name__} {getattr(vectors, 'shape', '')} "
                         f"{getattr(vectors, 'dtype', '')}")
    trainable = isinstance(backbone, TrainableBackbone)
    if isinstance(backbone, TrainableBackbone):  # trainable
        prefixes = backbone.tokenize.prefixes
        batch = backbone.tokenize(texts, kind="document", max_length=32)
        embedded = backbone.embed(batch, kind="document")
        if set(prefixes) != {"query", "document"} or tuple(embedded.shape) != (len(texts), backbone.dim):
            raise broken("backbone", name, "backbone-train",
                         f"prefixes {sorted(prefixes)}, embed gave shape {tuple(embedded.shape)}")
        if backbone.capabilities & {"seq2seq", "mlm"} and not isinstance(backbone, LanguageModelBackbone):
            raise broken("backbone", name, "backbone-train", "it has capability seq2seq or mlm but no enable_lm()")
    return {"dim": backbone.dim, "capabilities": sorted(backbone.capabilities), "trainable": trainable}


def _check_extractor(name: str, options: dict[str, Any]) -> dict[str, Any]:
    extractor = get_registry().create("extractor", name, **options)
    found = refused = 0
    for record in records():
        text = record.text()
        try:
            entities = extractor.extract(text, language=getattr(record, "language", None))
        except StructretError:  # a clear refusal (prose to a code parser) is within the contract
            refused += 1
            continue
        found += len(check_entities(name, text, entities))
    return {"entities": found, "refused": refused}


def _check_linearizer(name: str, options: dict[str, Any]) -> dict[str, Any]:
    linearizer = get_registry().create("linearizer", name, **options)
    written = refused = 0
    for record in records():
        try:
            seq = linearizer.linearize(record)
        except StructretError:  # a clear refusal (a product to a code linearizer) is within the contract
            refused += 1
            continue
        if seq is None:
            continue
        parents = seq.parents
        if parents is not None and (len(parents) != len(seq.tokens) or any(
                not (p == -1 or 0 <= p < len(parents)) or p == i for i, p in enumerate(parents))):
            raise broken("linearizer", name, "linearizer-parents", f"tokens {seq.tokens[:8]}..., parents {parents[:8]}...")
        written += 1
    return {"linearized": written, "refused": refused}


def _check_dataset(name: str, options: dict[str, Any]) -> dict[str, Any]:
    path = options.pop("path", None)
    split = options.pop("split", None)
    registry = get_registry()
    registry.check("dataset", name, options)  # a bad option is the caller's, not a broken plugin
    if path is None:  # no data given: what it does with a path that does not exist
        missing = str(Path(tempfile.gettempdir()) / "structret-check-no-such-path")
        try:
            registry.create("dataset", name, missing, split=split, **options)
        except DataError:
            return {"missing path": "DataError"}
        except Exception as exc:
            raise broken("dataset", name, "dataset-shape", f"a missing path raised {type(exc).__name__}: {exc}") from exc
        raise broken("dataset", name, "dataset-shape", "a missing path gave a dataset, not a DataError")
    ds = registry.create("dataset", name, str(path), split=split, **options)
    if not isinstance(ds, Dataset):
        raise broken("dataset", name, "dataset-shape", f"it returned {type(ds).__name__}")
    bad = [f"qrels of {q}" for q, docs in ds.qrels.items() if q not in ds.queries or not set(docs) <= set(ds.corpus)]
    bad += [f"pair {p}" for p in ds.pairs or () if p[0] not in ds.queries or p[1] not in ds.corpus]
    bad += [f"negatives of {q}" for q, docs in ds.negatives.items() if not set(docs) <= set(ds.corpus)]
    if bad or ds.stats.used < 0:
        raise broken("dataset", name, "dataset-shape", f"unknown ids in {', '.join(bad[:3])}")
    return {"documents": len(ds.corpus), "queries": len(ds.queries)}


def _check_index(name: str, options: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    factory = get_registry().get("index", name).load()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 8)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = factory(8, metric="ip", **options)
    ids = [f"d{i}" for i in range(len(vectors))]
    index.add(ids, vectors)
    scores, found = index.search(vectors[:5], 3)
    if scores.shape != (5, 3) or [row[0] for row in found] != ids[:5] and getattr(index, "exact", False):
        raise broken("index", name, "index-search", f"scores {scores.shape}, first hits {[r[0] for r in found]}")
    if len(index) != len(vectors):
        raise broken("index", name, "index-search", f"len() is {len(index)} after adding {len(vectors)}")
    if isinstance(index, HasClose):
        index.close()
    return {"size": len(vectors)}


def _check_retriever(name: str, options: dict[str, Any]) -> dict[str, Any]:
    retriever = get_registry().create("retriever", name, **options)
    docs = [r.text() for r in records()]
    retriever.fit(docs)
    scores = retriever.score(["read a file", "red mug"])
    if getattr(scores, "shape", None) != (2, len(docs)):
        raise broken("retriever", name, "retriever-score", f"score() gave shape {getattr(scores, 'shape', None)}")
    return {"documents": len(docs)}


def _check_chunker(name: str, options: dict[str, Any]) -> dict[str, Any]:
    chunker = get_registry().create("chunker", name, **options)
    made = 0
    files = [(f"src/{r.id}.py", r.code + "\n\n" + r.code.replace("def ", "def other_")) for r in records()
             if isinstance(r, CodeRecord)] + [("README.md", "# Title\n\nSome words.\n\n## Part\n\nMore.\n")]
    for path, text in files:
        units = chunker.chunk(text, path, chunker.language(path, text.encode()))
        lines = text.splitlines()
        after = 0  # the last line of the unit before
        for unit in units:
            gap = lines[after:unit.start - 1]
            if unit.start <= after or unit.end < unit.start or any(line.strip() for line in gap) or \
                    unit.text.splitlines() != lines[unit.start - 1:unit.end]:
                raise broken("chunker", name, "chunker-tiling", f"{path}: a unit of lines {unit.start}-{unit.end} "
                             f"after line {after}")
            after = unit.end
        if any(line.strip() for line in lines[after:]):
            raise broken("chunker", name, "chunker-tiling", f"{path}: units end at line {after} of {len(lines)}")
        made += len(units)
    return {"files": len(files), "units": made}


_CHECKS: dict[str, Callable[..., dict[str, Any]]] = {  # _check_objective also takes a backbone
    "objective": _check_objective, "backbone": _check_backbone, "extractor": _check_extractor,
    "linearizer": _check_linearizer, "dataset": _check_dataset, "index": _check_index,
    "retriever": _check_retriever, "chunker": _check_chunker}
KINDS = tuple(_CHECKS)


def check_plugin(kind: str, name: str, **options: Any) -> dict[str, Any]:
    """Run the contract of ``kind`` against the installed plugin ``name`` created with ``options``;
    return what was checked. Objectives take ``backbone=`` (an object) to be checked on your own
    backbone instead of the tiny fixtures; datasets take ``path=`` (and ``split=``). A broken rule
    raises ``ContractError``; other structret errors (a missing model, a missing dependency)
    propagate as they are."""
    if kind not in _CHECKS:
        raise PluginError(f"check_plugin checks {', '.join(KINDS)}; not '{kind}'")
    if kind == "objective":
        backbone = options.pop("backbone", None)
        return _CHECKS[kind](name, options, backbone)
    return _CHECKS[kind](name, dict(options))
