"""bm25-fields: a function's fields read from its text, one BM25 each, weighted; saved and loaded."""

import json

import numpy as np
import pytest
from structret_lexical.fields import FieldBM25Retriever, parse_weights, split_fields


@pytest.mark.parametrize("code, name, calls", [
    ('func (r *Repo) ResetHome(dir string) error {\n\t// reset it\n\tos.Remove(dir)\n\treturn fmt.Errorf("x")\n}',
     "ResetHome", "Remove Errorf"),
    ("public static int parseInt(String s) {\n  /* parse */ return Integer.valueOf(s);\n}", "parseInt", "valueOf"),
    ("def read_config(path):\n    # open it\n    return load(open(path))", "read_config", "load open"),
    ("def each_item\n  items.each { |x| yield x }\nend", "each_item", ""),
    ("foo: function (a, b) { return bar(a) }", "foo", ""),
    ("@decorator\ndef wrapped(x):\n    return helper(x)", "wrapped", "helper"),
    ("public function getName(): string\n{\n    return $this->name;\n}", "getName", ""),
])
def test_fields_are_read_from_code_in_several_languages(code, name, calls):
    fields = split_fields(code)
    assert fields["name"] == name and fields["calls"] == calls and fields["body"] == code


def test_comments_and_strings_are_a_field():
    fields = split_fields('def f(x):\n    # the cache key\n    return "user id " + x')
    assert "the cache key" in fields["comments"] and "user id" in fields["comments"]


def test_a_weighted_name_outranks_a_word_deep_in_a_body():
    docs = ["def cache_lookup(key):\n    return table[key]",
            "def run(job):\n    log('running')\n    cache = {}\n    lookup = 1\n    return job(cache, lookup)"]
    body_only = FieldBM25Retriever(weights="body:1")
    body_only.fit(docs)
    named = FieldBM25Retriever(weights="name:3,body:1")
    named.fit(docs)
    plain, weighted = body_only.score(["cache lookup"])[0], named.score(["cache lookup"])[0]
    assert weighted[0] - weighted[1] > plain[0] - plain[1]
    assert weighted.argmax() == 0


def test_scores_are_the_weighted_sum_of_the_fields():
    docs = ["def read_file(path):\n    return open(path).read()", "def write_file(path, text):\n    save(path, text)"]
    retriever = FieldBM25Retriever(weights="name:2,calls:0.5,body:1")
    retriever.fit(docs)
    fields = retriever.field_scores(["read a file"])
    expected = 2 * fields["name"] + 0.5 * fields["calls"] + fields["body"]
    assert retriever.score(["read a file"]) == pytest.approx(expected)
    scores, top = retriever.search(["read a file"], k=2)
    assert list(top[0]) == [0, 1] and scores[0][0] >= scores[0][1]


def test_save_and_load_give_the_same_scores(tmp_path):
    docs = ["def alpha_beta(x):\n    # gamma\n    return delta(x)", "def epsilon(y):\n    return y"]
    retriever = FieldBM25Retriever()
    retriever.fit(docs)
    retriever.save(tmp_path / "f")
    loaded = FieldBM25Retriever.load(tmp_path / "f")
    queries = ["alpha beta gamma", "epsilon"]
    assert np.array_equal(loaded.score(queries), retriever.score(queries)) and len(loaded) == 2
    with pytest.raises(ValueError, match="does not hold a saved index"):
        FieldBM25Retriever.load(tmp_path)


@pytest.mark.parametrize("text, words", [
    ("name:x", "must be a number"), ("title:1", "unknown field 'title'"), ("name", "is not FIELD:WEIGHT"),
    ("name:0,body:0", "every field weighs 0"), ("name:-1", ">= 0"),
])
def test_bad_weights_say_what_to_write(text, words):
    with pytest.raises(ValueError, match=None) as err:
        parse_weights(text)
    assert words in str(err.value)


def test_hybrid_with_fields_in_an_index(tmp_path):
    import structret

    from test_hybrid import _code_rows

    data = _code_rows(tmp_path / "rows.jsonl.gz", n=30)
    index = structret.build_index(structret.load_model("minilm"), f"codesearchnet:{data}", lexical="bm25-fields",
                                  show_progress=False)
    index.save(tmp_path / "idx")
    loaded = structret.load_index(tmp_path / "idx")
    hits = loaded.search("kilo then lima", k=3)
    assert [h.id for h in hits] == [h.id for h in index.search("kilo then lima", k=3)]
    assert loaded.meta["lexical"]["retriever"] == "bm25-fields"


def test_item_fields_read_title_content_and_each_aspect(tmp_path):
    from structret_lexical.fields import ItemFieldBM25Retriever, parse_item_weights

    from structret.records import CodeRecord, ItemRecord

    items = [ItemRecord("a", title="vim", content="a text editor", aspects={"use": ["editing"], "role": ["program"]}),
             ItemRecord("b", title="gimp", content="an image editor", aspects={"use": ["viewing"], "role": ["program"]})]
    retriever = ItemFieldBM25Retriever(weights="content:1,aspect.use:2")
    texts = [retriever.format_document(i) for i in items]
    retriever.fit(texts)
    assert set(retriever._fields) == {"content", "aspect.use"}
    scores = retriever.score(["editing tool"])[0]
    assert scores[0] > scores[1] == 0  # "editing" is only in a's use aspect
    assert retriever.score(["image"])[0].argmax() == 1
    retriever.save(tmp_path / "i")
    assert np.array_equal(ItemFieldBM25Retriever.load(tmp_path / "i").score(["editing"]), retriever.score(["editing"]))
    code = retriever.format_document(CodeRecord("c", "def f(): pass", "python"))
    assert json.loads(code) == {"content": "def f(): pass"}
    assert parse_item_weights("title:2,aspects:0.5") == {"title": 2.0, "aspects": 0.5}
    with pytest.raises(ValueError, match="unknown field .brand.; the fields are title, content, aspects or aspect.NAME"):
        parse_item_weights("brand:1")


def test_a_hybrid_gives_the_lexical_side_its_own_reading_of_items(fresh_registry):
    from structret.records import ItemRecord
    from structret.retrieval import make_retriever

    hybrid = make_retriever("bm25-item-fields+minilm", show_progress=False)
    item = ItemRecord("a", title="vim", content="a text editor", aspects={"use": ["editing"]})
    text = hybrid.format_document(item)
    assert str(text) == item.text() and json.loads(text.lexical)["aspects"] == {"use": "editing"}
    hybrid.fit([text, hybrid.format_document(ItemRecord("b", title="gimp", content="an image editor"))])
    assert hybrid.score(["editing"])[0].argmax() == 0
