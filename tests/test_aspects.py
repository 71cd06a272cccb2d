"""Products: ATTEMPT's aspect layout, SANTA's product template, aspect-mlm and the mlm baselines."""

from __future__ import annotations

import json
import random
from collections import Counter

import _tiny_models
import pytest
import torch
import torch.nn.functional as F
from structret_products.linearizers import aspect_layout, indicator_token

from structret.errors import PluginError
from structret.recipes import ObjectiveError
from structret.records import ItemRecord, Query, Sequence, TextRecord
from structret.registry import get_registry

ASPECTS = ["brand", "color", "category 1"]
_WORDS = _tiny_models._WORDS
# the tiny-model fixtures, bound by assignment so test parameters do not shadow an import
tiny_bert_dir = _tiny_models.tiny_bert_dir
one_torch_thread = _tiny_models.one_torch_thread


# --- the aspects layout ---------------------------------------------------------------------


def test_indicator_tokens_follow_one_rule():
    assert indicator_token("brand") == "[BRAND]"
    assert indicator_token("category 1") == "[CATEGORY_1]"
    assert indicator_token(" product--type ") == "[PRODUCT_TYPE]"
    for reserved in ("c", "sep", "CLS", "[mask]"):
        with pytest.raises(PluginError, match="content indicator or a tokenizer's own special token"):
            indicator_token(reserved)
    with pytest.raises(PluginError, match="no letter or digit"):
        indicator_token("--")
    with pytest.raises(PluginError, match="both give the indicator \\[CATEGORY_1\\]"):
        get_registry().create("linearizer", "aspects", aspects=["category 1", "category_1"])


def test_aspects_layout_exactly_with_an_absent_aspect():
    item = ItemRecord(id="p1", title="Trail Shoe", content="light and waterproof",
                      aspects={"brand": ["Nike"], "category 1": ["Shoes", "Running"]})
    linearizer = get_registry().create("linearizer", "aspects", aspects=ASPECTS)
    # color is absent: its indicator stays, with empty text
    assert linearizer.text(item) == "[BRAND] Nike [COLOR] [CATEGORY_1] Shoes, Running [SEP] [C] Trail Shoe light and waterproof"
    assert linearizer.linearize(item) == Sequence(
        ["[BRAND]", "Nike", "[COLOR]", "[CATEGORY_1]", "Shoes,", "Running", "[SEP]", "[C]",
         "Trail", "Shoe", "light", "and", "waterproof", "[SEP]"]
    )
    layout = linearizer.layout(item)
    assert layout.aspects == {"brand": "Nike", "color": "", "category 1": "Shoes, Running"}
    assert layout.content == item.text()  # content = title + content, as retrieval encodes items
    assert [(s.kind, layout.piece(s)) for s in layout.segments] == [
        ("indicator", "[BRAND]"), ("aspect", "Nike"), ("indicator", "[COLOR]"), ("aspect", ""),
        ("indicator", "[CATEGORY_1]"), ("aspect", "Shoes, Running"), ("separator", "[SEP]"),
        ("indicator", "[C]"), ("content", "Trail Shoe light and waterproof"),
    ]
    assert linearizer.special_tokens() == ["[BRAND]", "[COLOR]", "[CATEGORY_1]", "[C]"]


def test_aspects_default_order_queries_and_bullets():
    item = ItemRecord(id="p1", title="Mug", bullets=["holds 12 oz"], aspects={"color": ["red"], "brand": ["Acme"]})
    default = get_registry().create("linearizer", "aspects")
    assert default.text(item) == "[BRAND] Acme [COLOR] red [SEP] [C] Mug"  # sorted keys of the record
    assert default.special_tokens([item, "size"]) == ["[BRAND]", "[COLOR]", "[SIZE]", "[C]"]
    bullets = get_registry().create("linearizer", "aspects", content_fields=["title", "bullets"])
    assert bullets.text(item).endswith("[C] Mug holds 12 oz")
    fixed = get_registry().create("linearizer", "aspects", aspects=["brand", "color"])
    query = Query(id="q", text="red mug", aspects={"color": ["red"]})
    # retrieval: the query's aspect text is kept empty, the indicators stay (ATTEMPT 3.2)
    assert fixed.text(query) == "[BRAND] [COLOR] [SEP] [C] red mug"
    assert aspect_layout(query, ["brand", "color"]).text == "[BRAND] [COLOR] red [SEP] [C] red mug"
    assert fixed.linearize(object()) is None and sum(fixed.failures.values()) == 1


def test_product_template_exactly_as_openmatch():
    product = get_registry().create("linearizer", "product")
    item = ItemRecord(id="p", title="Nike Air Zoom", content="A light running shoe.", aspects={"brand": ["Nike"]})
    assert product.text(item) == "title : Nike Air Zoom text : A light running shoe."
    assert product.text(ItemRecord(id="p", title="Mug")) == "title : Mug text : "  # OpenMatch keeps the space
    assert product.text(TextRecord(id="t", text_="body", title="T")) == "title : T text : body"
    assert product.text(Query(id="q", text="running shoes")) == "running shoes"
    assert product.linearize(item).tokens == ["title", ":", "Nike", "Air", "Zoom", "text", ":", "A", "light",
                                              "running", "shoe."]


# --- aspect-mlm ----------------------------------------------------------------------------------


class _Backbone:
    """A tiny BERT tokenizer (and model) with the capability the HF encoder is getting:
    ``add_special_tokens`` adds them as special tokens and resizes the embeddings."""

    name = "tiny-bert"
    capabilities = frozenset({"encoder", "mlm"})

    def __init__(self, directory, model=False):
        from transformers import AutoTokenizer, BertForMaskedLM

        self.tokenizer = AutoTokenizer.from_pretrained(directory)
        self.model = BertForMaskedLM.from_pretrained(directory) if model else None

    def add_special_tokens(self, tokens):
        self.tokenizer.add_special_tokens({"additional_special_tokens": list(tokens)})
        if self.model is not None:
            self.model.resize_token_embeddings(len(self.tokenizer))


@pytest.fixture(scope="module")
def backbone(tiny_bert_dir):
    return _Backbone(tiny_bert_dir)


def _phrase(rng, lo, hi):
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))


def _corpus(n, seed=0):
    """Items with brand / color / category present or absent (some with none at all), and queries."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        aspects = {name: [_phrase(rng, 1, 3)] for name in ASPECTS if rng.random() < 0.7}
        if i % 4 == 3:
            records.append(Query(id=f"q{i}", text=_phrase(rng, 3, 8), aspects=aspects))
        else:
            records.append(ItemRecord(id=f"p{i}", title=_phrase(rng, 2, 6), content=_phrase(rng, 4, 16),
                                      aspects=aspects))
    return records


def _rows(objective, backbone, records, *, seed=0, max_length=128):
    texts = [r.text() if isinstance(r, ItemRecord) else getattr(r, "text", "") for r in records]
    rngs = [random.Random(f"{seed}/{i}") for i in range(len(records))]
    return objective.rows(texts, records, backbone, max_length=max_length, rngs=rngs)


def test_aspect_mlm_views_mask_only_their_segment_at_their_ratio(backbone):
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS)
    objective.check(backbone)
    tokenizer = backbone.tokenizer
    protected = set(tokenizer.all_special_ids)
    records = _corpus(2000)
    rows = []
    for seed in range(2):
        rows += _rows(objective, backbone, records, seed=seed)

    chosen, candidates = Counter(), Counter()
    outcome = Counter()
    for row in rows:
        predicted = {"mlm": "content", "a2c": "content", "c2a": "aspect"}[row.view]
        assert len(row.input_ids) == len(row.original) == len(row.labels) == len(row.kinds)
        for token, original, label, kind in zip(row.input_ids, row.original, row.labels, row.kinds):
            if label == -100:
                assert token == original  # nothing unpredicted is touched
            else:
                # a2c never masks aspect tokens, c2a never content tokens; specials and indicators never
                assert kind == predicted and label == original and original not in protected
                outcome["mask" if token == tokenizer.mask_token_id else "kept" if token == original else "random"] += 1
                assert token not in protected - {tokenizer.mask_token_id}
            if kind in ("special", "indicator"):
                assert token == original and original in protected
        if row.view == "mlm":
            assert "indicator" not in row.kinds and "aspect" not in row.kinds  # content alone
        key = (row.view, row.record_kind)
        candidates[key] += row.kinds.count(predicted)
        chosen[key] += row.masked

    ratio = {key: chosen[key] / candidates[key] for key in candidates}
    for view in ("mlm", "a2c"):
        assert ratio[view, "item"] == pytest.approx(0.15, abs=0.01)
        assert ratio[view, "query"] == pytest.approx(0.3, abs=0.02)
    assert ratio["c2a", "item"] == pytest.approx(0.6, abs=0.02)
    assert ratio["c2a", "query"] == pytest.approx(0.6, abs=0.03)
    total = sum(outcome.values())
    assert outcome["mask"] / total == pytest.approx(0.8, abs=0.015)  # BERT's 80/10/10
    assert outcome["random"] / total == pytest.approx(0.1, abs=0.015)
    assert outcome["kept"] / total == pytest.approx(0.1, abs=0.015)

    # items and queries without aspect text have no c2a row, and are counted
    without = sum(1 for r in records if not r.aspects)
    assert without > 0
    assert objective.report()["c2a rows left out (no aspect text)"] == 2 * without
    assert Counter(row.view for row in rows) == {"mlm": 2 * len(records), "a2c": 2 * len(records),
                                                 "c2a": 2 * (len(records) - without)}


def test_aspect_rows_tokenize_like_the_layout_text(backbone):
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS)
    objective.check(backbone)
    item = ItemRecord(id="p", title="sort the list", content="returns sorted numbers",
                      aspects={"brand": ["python code"], "category 1": ["search", "index"]})
    rows = _rows(objective, backbone, [item])
    layout = aspect_layout(item, ASPECTS)
    a2c = next(r for r in rows if r.view == "a2c")
    assert a2c.original == backbone.tokenizer(layout.text)["input_ids"]
    mlm_row = next(r for r in rows if r.view == "mlm")
    assert mlm_row.original == backbone.tokenizer(item.text())["input_ids"]


def test_truncation_cuts_content_first_and_never_an_indicator(backbone):
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS)
    objective.check(backbone)
    item = ItemRecord(id="p", title=_phrase(random.Random(1), 40, 40), aspects={"brand": ["python code"]})
    for row in _rows(objective, backbone, [item], max_length=16):
        assert len(row.input_ids) <= 16
        if row.view != "mlm":
            assert row.kinds.count("indicator") == 4 and row.kinds.count("aspect") == 2
    with pytest.raises(ObjectiveError, match="max_length is too short"):
        _rows(objective, backbone, [item], max_length=6)


def _batch(objective, backbone, records, seed=0, max_length=64):
    texts = [r.text() if isinstance(r, ItemRecord) else r.text for r in records]
    rngs = [random.Random(f"{seed}/{i}") for i in range(len(records))]
    batch = objective.corrupt(texts, records, backbone, max_length=max_length, label_max_length=8, rngs=rngs)
    views = [r.view for r in _rows(objective, backbone, records, seed=seed, max_length=max_length)]
    return batch, views


def _full_items(n, seed=3):
    rng = random.Random(seed)
    return [ItemRecord(id=f"p{i}", title=_phrase(rng, 4, 8), content=_phrase(rng, 10, 20),
                       aspects={name: [_phrase(rng, 2, 3)] for name in ASPECTS}) for i in range(n)]


@pytest.mark.parametrize("weight", [1.0, 0.5])
def test_label_weights_sum_to_one_plus_two_lambda(backbone, weight):
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS, mutual_weight=weight)
    objective.check(backbone)
    batch, views = _batch(objective, backbone, _full_items(6))
    weights, labels = batch["label_weights"], batch["labels"]
    assert weights.shape == labels.shape and weights.dtype == torch.float32
    assert torch.equal(weights != 0, labels != -100)
    per_view = Counter()
    for i, view in enumerate(views):
        per_view[view] += float(weights[i].sum())
    assert set(per_view) == {"mlm", "a2c", "c2a"}
    assert per_view["mlm"] == pytest.approx(1.0)
    assert per_view["a2c"] == pytest.approx(weight) and per_view["c2a"] == pytest.approx(weight)
    assert float(weights.sum()) == pytest.approx(1 + 2 * weight)


def test_weighted_loss_is_eq4_on_a_tiny_bert(tiny_bert_dir):
    backbone = _Backbone(tiny_bert_dir, model=True)
    weight = 0.7
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS, mutual_weight=weight)
    objective.check(backbone)
    model = backbone.model.eval()
    assert model.get_input_embeddings().num_embeddings == len(backbone.tokenizer)  # resized for the indicators
    batch, views = _batch(objective, backbone, _full_items(5, seed=7))
    with torch.no_grad():
        logits = model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}).logits
    token_ce = F.cross_entropy(logits.transpose(1, 2), batch["labels"], ignore_index=-100, reduction="none")
    weighted = (batch["label_weights"] * token_ce).sum()

    def view_mean(view):
        rows = [i for i, v in enumerate(views) if v == view]
        picked = batch["labels"][rows] != -100
        return token_ce[rows][picked].mean()

    expected = view_mean("mlm") + weight * (view_mean("a2c") + view_mean("c2a"))
    torch.testing.assert_close(weighted, expected)
    plain = F.cross_entropy(logits.transpose(1, 2), batch["labels"], ignore_index=-100)
    assert not torch.isclose(weighted, plain)  # the weighting is not the plain token mean

    # pooled = ATTEMPT's released code: one mean over all masked tokens (lambda 1)
    pooled = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS, reduction="pooled")
    batch, _ = _batch(pooled, backbone, _full_items(5, seed=7))
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    token_ce = F.cross_entropy(logits.transpose(1, 2), batch["labels"], ignore_index=-100, reduction="none")
    torch.testing.assert_close((batch["label_weights"] * token_ce).sum(),
                               F.cross_entropy(logits.transpose(1, 2), batch["labels"], ignore_index=-100))


def test_passages_without_records_get_plain_mlm_counted(backbone):
    objective = get_registry().create("objective", "aspect-mlm", aspects=ASPECTS)
    objective.check(backbone)
    item = _full_items(1)[0]
    batch = objective.corrupt([item.text(), "sort the list of numbers"], [item, None], backbone, max_length=64,
                              label_max_length=8, rngs=[random.Random(0), random.Random(1)])
    assert batch["input_ids"].shape[0] == 4  # three views of the item, one plain row
    report = objective.report()
    assert report["passages without an item record (plain MLM on the text)"] == 1
    assert report["rows mlm"] == 2 and report["rows a2c"] == 1 and report["rows c2a"] == 1


def test_aspect_mlm_checks_the_backbone(tiny_bert_dir):
    objective = get_registry().create("objective", "aspect-mlm")
    assert objective.needs == frozenset({"mlm"}) and objective.role == "corruption"

    class NoAdd(_Backbone):
        add_special_tokens = None

    with pytest.raises(ObjectiveError, match="has no add_special_tokens\\(tokens\\) method"):
        objective.check(NoAdd(tiny_bert_dir))

    class EncoderOnly(_Backbone):
        capabilities = frozenset({"encoder"})

    with pytest.raises(ObjectiveError, match="needs a backbone with a masked-LM head"):
        objective.check(EncoderOnly(tiny_bert_dir))
    from structret.errors import PluginError

    with pytest.raises(PluginError, match="aspect_mask_ratio=1.5: Input should be less than 1"):
        get_registry().create("objective", "aspect-mlm", aspect_mask_ratio=1.5)
    with pytest.raises(ObjectiveError, match="content indicator"):
        get_registry().create("objective", "aspect-mlm", aspects=["brand", "c"])


# --- the mlm baselines ------------------------------------------------------------------------


@pytest.mark.parametrize("aspect_ratio, expected", [(None, 0.15), (0.6, 0.6)])
def test_bibert_c_masks_aspects_at_their_ratio(backbone, aspect_ratio, expected):
    objective = get_registry().create("objective", "mlm", mlm_input="aspects", aspects=ASPECTS,
                                      aspect_mask_ratio=aspect_ratio)
    objective.check(backbone)
    items = [r for r in _corpus(2000, seed=5) if isinstance(r, ItemRecord)]
    rows = _rows(objective, backbone, items)
    assert len(rows) == len(items)  # one row per item
    chosen, candidates = Counter(), Counter()
    for row in rows:
        for label, kind in zip(row.labels, row.kinds):
            candidates[kind] += 1
            chosen[kind] += label != -100
    assert chosen["indicator"] == chosen["special"] == 0
    assert chosen["aspect"] / candidates["aspect"] == pytest.approx(expected, abs=0.02)
    assert chosen["content"] / candidates["content"] == pytest.approx(0.15, abs=0.01)
    batch = objective.corrupt([i.text() for i in items[:4]], items[:4], backbone, max_length=64,
                              label_max_length=8, rngs=[random.Random(i) for i in range(4)])
    assert "label_weights" not in batch  # a plain token mean


def test_bibert_is_content_only(backbone):
    objective = get_registry().create("objective", "mlm")
    objective.check(backbone)
    item = _full_items(1)[0]
    (row,) = _rows(objective, backbone, [item])
    assert row.original == backbone.tokenizer(item.text())["input_ids"]
    assert set(row.kinds) == {"special", "content"}
    with pytest.raises(ObjectiveError, match="aspect_mask_ratio needs layout"):
        get_registry().create("objective", "mlm", aspect_mask_ratio=0.6)


# --- through the trainer, on a real Hugging Face backbone ------------------------------------

_STANZA = """Package: {name}
Section: {section}
Priority: optional
Tag: role::program, use::{use}
Description: {synopsis}
 {long}

"""


def _catalog(path):
    # names of the catalog's open half (sha1 not starting 0-7): the reader's default keeps to it
    rows = [("jq", "utils", "searching", "command-line JSON processor", "jq is like sed for JSON data"),
            ("aria2", "web", "downloading", "command line tool for transferring data",
             "aria2 is a command line tool for transferring data with URL syntax"),
            ("units", "math", "calculating", "arbitrary precision calculator", "units is an interactive calculator"),
            ("ed", "editors", "editing", "classic line editor", "ed is a line-oriented text editor"),
            ("ack", "utils", "searching", "search files for a pattern", "ack searches files for lines"),
            ("wget", "web", "downloading", "retrieves files from the web", "wget is a network utility")]
    path.write_text("".join(_STANZA.format(name=n, section=s, use=u, synopsis=y, long=lg)
                            for n, s, u, y, lg in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("objective", ["aspect-mlm", "mlm"])
def test_trainer_pretrains_with_indicators_added_to_the_backbone(tmp_path, tiny_bert_dir, objective):
    import json

    from structret.recipes import Recipe, resolve_recipe
    from structret.training import train

    catalog = _catalog(tmp_path / "Packages")
    recipe = resolve_recipe(None, dict(objective=objective, backbone="hf-encoder", model=str(tiny_bert_dir),
                    data=f"debian-packages:{catalog}", split="all", aspects="section,use",
                    mlm_input="aspects", aspect_mask_ratio=0.6,
                    output=str(tmp_path / "run"), batch_size=3, max_steps=4, lr=1e-3, checkpoint_every=2,
                    log_every=2, passage_max_len=64))
    final = train(recipe)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert f"loss/{objective}" in rows[-1] and all(r["loss"] > 0 for r in rows)
    trained = get_registry().create("backbone", "hf-encoder", model=str(final))
    vocab = trained.tokenizer.get_vocab()
    assert {"[SECTION]", "[USE]", "[C]"} <= set(vocab)
    assert trained.model.get_input_embeddings().num_embeddings == len(trained.tokenizer)
    # an indicator is one token, never split
    assert trained.tokenizer("[SECTION] web", add_special_tokens=False)["input_ids"][0] == vocab["[SECTION]"]
    counts = json.loads((tmp_path / "run" / "counts.json").read_text())[objective]
    assert counts["rows mlm"] == 4 * 3  # one content row per passage, every step
    assert not any("without an item record" in k for k in counts)  # each came with its ItemRecord


def test_aspect_mlm_runs_alone(tmp_path):
    from structret.recipes import Recipe, resolve_recipe
    from structret.training import build_objectives

    with pytest.raises(ObjectiveError, match="runs alone"):
        build_objectives(resolve_recipe(None, dict(objective="dr+aspect-mlm")))


def test_text_format_is_what_training_and_retrieval_both_read(tmp_path, tiny_bert_dir):
    import json
    import shutil

    from structret.linearization import TextFormat
    from structret.search.system import make_retriever
    from structret.training import examples_from_dataset

    item = ItemRecord(id="p", title="desk lamp", content="a bright lamp", aspects={"brand": ["Acme"]})
    query = Query(id="q", text="lamp for my desk")
    fmt = TextFormat("aspects", {"aspects": "brand,color"})
    assert fmt.document(item) == "[BRAND] Acme [COLOR] [SEP] [C] desk lamp a bright lamp"
    assert fmt.query(query) == fmt.query("lamp for my desk") == "[BRAND] [COLOR] [SEP] [C] lamp for my desk"
    assert TextFormat().document(item) == item.text() and TextFormat().query(query) == query.text
    with pytest.raises(PluginError, match="no text"):
        TextFormat("dfs")

    from structret.records import Dataset, ReadStats

    dataset = Dataset("d", {"p": item}, {"q": query}, {"q": {"p": 1}}, ReadStats(), pairs=[("q", "p")])
    (example,) = examples_from_dataset(dataset, fmt)
    assert example.queries == [fmt.query(query)] and example.positives == [fmt.document(item)]

    # a trained run names its format, and is scored on it
    final = tmp_path / "run" / "final"
    shutil.copytree(tiny_bert_dir, final)
    (final / "structret.json").write_text(json.dumps(
        {"backbone": "hf-encoder", "recipe": {"text_format": "aspects", "aspects": "brand,color"}}))
    from structret.artifacts import write_checksums

    write_checksums(final)  # as 'structret train' seals final/
    retriever = make_retriever(str(tmp_path / "run"), show_progress=False)
    assert retriever.format_document(item) == fmt.document(item)
    assert retriever.format_query(query) == fmt.query(query)


def test_mtbert_classifies_aspects_beside_mlm_and_resumes_exactly(tmp_path, tiny_bert_dir):
    from safetensors.torch import load_file

    from structret.recipes import Recipe, resolve_recipe
    from structret.training import train

    catalog = _catalog(tmp_path / "Packages")

    def recipe(name):
        return resolve_recipe(None, dict(objective="mlm+aspect-class", backbone="hf-encoder", model=str(tiny_bert_dir),
                      data=f"debian-packages:{catalog}", split="all", aspects="section,use",
                      output=str(tmp_path / name), batch_size=3, max_steps=6, lr=1e-3, checkpoint_every=2,
                      keep_checkpoints=0, log_every=1, passage_max_len=64))

    class Stop(Exception):
        pass

    whole = train(recipe("whole"))
    rows = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss/aspect-class"] > 0 for r in rows)
    counts = json.loads((tmp_path / "whole" / "counts.json").read_text())["aspect-class"]
    # section: utils and web occur twice (classes); math and editors once (too rare)
    assert counts["classes of section"] == 2 and counts["classes of use"] == 2
    assert counts["section: value too rare for a class"] > 0
    heads = load_file(str(tmp_path / "whole" / "checkpoint-000004" / "trainer" / "objective_heads.safetensors"))
    assert set(heads) == {f"aspect-class.{a}.{p}" for a in ("section", "use") for p in ("weight", "bias")}

    def stop_at_4(step, logs):
        if step == 4:
            raise Stop
    with pytest.raises(Stop):
        train(recipe("cut"), callback=stop_at_4)
    resumed = train(recipe("cut"), resume=True)
    expected, got = load_file(str(whole / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(expected[k], got[k]) for k in expected)  # the heads were restored too


@pytest.mark.parametrize("name, options", [("aspect-mlm", {}), ("mlm", {"mlm_input": "aspects"})])
def test_indicator_init_words_starts_each_indicator_as_its_aspect_name(tiny_bert_dir, name, options):
    from structret_backbones.hf import HFEncoder

    def started(init):
        backbone = HFEncoder(tiny_bert_dir)
        objective = get_registry().create("objective", name, aspects=["value", "search_query"],
                                          indicator_init=init, **options)
        objective.check(backbone)  # adds [VALUE], [SEARCH_QUERY], [C] to the tokenizer
        table = backbone.model.get_input_embeddings().weight.detach()
        row = {t: table[backbone.tokenizer.convert_tokens_to_ids(t)] for t in ("[VALUE]", "[SEARCH_QUERY]", "[C]")}
        piece = {w: table[backbone.tokenizer(w, add_special_tokens=False)["input_ids"]].mean(0)
                 for w in ("value", "search query", "content")}
        return row, piece, backbone, objective

    row, piece, backbone, objective = started("words")
    assert torch.allclose(row["[VALUE]"], piece["value"])
    assert torch.allclose(row["[SEARCH_QUERY]"], piece["search query"])
    assert torch.allclose(row["[C]"], piece["content"])
    lm = backbone.lm_model.get_output_embeddings().weight.detach()  # the tied output row starts there too
    assert torch.allclose(lm[backbone.tokenizer.convert_tokens_to_ids("[VALUE]")], piece["value"])
    table = backbone.model.get_input_embeddings().weight
    with torch.no_grad():
        table[backbone.tokenizer.convert_tokens_to_ids("[VALUE]")] += 1.0  # as training would move it
    trained = table[backbone.tokenizer.convert_tokens_to_ids("[VALUE]")].detach().clone()
    objective.check(backbone)  # a run continued from a trained model keeps its indicators
    assert torch.equal(table[backbone.tokenizer.convert_tokens_to_ids("[VALUE]")].detach(), trained)
    row, piece, _, _ = started("random")
    assert not torch.allclose(row["[VALUE]"], piece["value"])
