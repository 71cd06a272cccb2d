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
    from structret.search.system import make_retriever

    hybrid = make_retriever("bm25-item-fields+minilm", show_progress=False)
    item = ItemRecord("a", title="vim", content="a text editor", aspects={"use": ["editing"]})
    text = hybrid.format_document(item)
    assert str(text) == item.text() and json.loads(text.lexical)["aspects"] == {"use": "editing"}
    hybrid.fit([text, hybrid.format_document(ItemRecord("b", title="gimp", content="an image editor"))])
    assert hybrid.score(["editing"])[0].argmax() == 0


def test_a_function_read_with_its_place_has_path_and_scope_fields():
    from structret_lexical.fields import code_reading, path_words

    code = "def get(self, key):\n    return self.load(key)"
    reading = code_reading(code, path="cache/backends/redis_store.py", func_name="RedisStore.get")
    fields = split_fields(reading)
    assert fields["path"] == "cache backends redis_store" and fields["scope"] == "RedisStore"
    # the code's own fields are read as from the code alone
    assert {f: fields[f] for f in ("name", "signature", "calls", "comments", "body")} == \
        {f: split_fields(code)[f] for f in ("name", "signature", "calls", "comments", "body")}
    assert code_reading(code) == code and split_fields(code)["path"] == "" == split_fields(code)["scope"]
    assert path_words("a\\b\\c.java") == "a b c" and path_words("Makefile") == "Makefile"


def test_place_fields_at_weight_0_score_as_the_code_alone():
    from structret.records import CodeRecord

    records = [CodeRecord("a", "def read_config(path):\n    return parse(open(path))", "python",
                          path="app/settings.py", func_name="read_config"),
               CodeRecord("b", "def parse(text):\n    return text.split()", "python", path="app/parse.py",
                          func_name="Parser.parse")]
    plain, placed = FieldBM25Retriever(), FieldBM25Retriever()
    plain.fit([r.text() for r in records])
    placed.fit([placed.format_document(r) for r in records])
    queries = ["read the config", "parse text", "settings parser"]
    assert np.array_equal(plain.score(queries), placed.score(queries))


def test_callers_are_resolved_in_the_callers_file_first():
    from structret_lexical.fields import add_callers, code_reading

    def fields(code, path, func_name):
        return split_fields(code_reading(code, path=path, func_name=func_name))

    split = [fields("def load(x):\n    return x", "a.py", "load"),
             fields("def load(y):\n    return y", "b.py", "load"),
             fields("def warm_cache():\n    return load(1)", "a.py", "warm_cache"),
             fields("def refresh_all():\n    load(2)\n    load(3)", "c.py", "refresh_all")]
    add_callers(split)
    # a.py's load is called from its own file and from c.py (no load there: every load); b.py's from c.py only
    assert split[0]["callers"].split() == ["warm_cache", "refresh_all"]
    assert split[1]["callers"].split() == ["refresh_all"] and split[2]["callers"] == ""


def test_bm25_project_finds_a_function_by_its_file_class_and_callers(fresh_registry):
    from structret.records import CodeRecord
    from structret.registry import get_registry

    records = [CodeRecord("a", "def get(self, key):\n    return self.rows[key]", "python",
                          path="store/sqlite_backend.py", func_name="SqliteBackend.get"),
               CodeRecord("b", "def get(self, key):\n    return self.cache[key]", "python",
                          path="store/memory.py", func_name="MemoryCache.get"),
               CodeRecord("c", "def lookup_user(db, uid):\n    return get(uid)", "python",
                          path="users/accounts.py", func_name="lookup_user")]
    project = get_registry().create("retriever", "bm25-project")
    fields = get_registry().create("retriever", "bm25-fields")
    for retriever in (project, fields):
        retriever.fit([retriever.format_document(r) for r in records])
    for query, answer in (("sqlite backend get", 0), ("memory cache get", 1)):
        assert project.score([query])[0].argmax() == answer
    both = project.score(["lookup user"])[0]
    assert both[2] > 0 and both[0] > 0 and both[1] > 0  # c by its name, a and b by their caller
    assert fields.score(["sqlite backend"])[0].max() == 0  # bm25-fields weighs no place field


def test_an_index_of_items_gives_its_lexical_side_their_aspects_and_keeps_them_across_updates(tmp_path,
                                                                                            fresh_registry):
    import structret
    from structret.search.update import apply_update
    from structret.records import Dataset, ItemRecord, ReadStats

    items = {"vim": ItemRecord("vim", title="vim", content="a text editor", aspects={"section": ["editors"]}),
             "gimp": ItemRecord("gimp", title="gimp", content="an image program", aspects={"section": ["graphics"]})}
    data = Dataset("items", items, {}, {}, ReadStats())
    model = structret.load_model("minilm")
    index = structret.build_index(model, data, lexical="bm25-item-fields", show_progress=False)
    assert json.loads(index.readings["gimp"])["aspects"] == {"section": "graphics"}
    index.save(tmp_path / "idx")
    loaded = structret.load_index(tmp_path / "idx")
    assert loaded.lexical.retriever.score(["graphics"])[0].argmax() == loaded.lexical_ids.index("gimp")  # an aspect's word
    new = ItemRecord("krita", title="krita", content="a painting program", aspects={"section": ["graphics"]})
    vectors = model.backbone.encode([new.text()], kind="document", show_progress=False)
    apply_update(loaded, tmp_path / "idx", ["krita"], vectors, [new.text()], ["vim"], "test",
                 readings=[loaded.lexical.retriever.format_document(new)])
    updated = structret.load_index(tmp_path / "idx")
    scores = dict(zip(updated.lexical_ids, updated.lexical.retriever.score(["graphics"])[0]))
    assert set(scores) == {"gimp", "krita"} and scores["gimp"] > 0 and scores["krita"] > 0
    from structret.errors import StructretError

    with pytest.raises(StructretError, match="readings= go with vectors"):
        structret.build_index(model, data, lexical="bm25-item-fields", readings=["x", "y"])
    vectors = model.backbone.encode(["a", "b"], kind="document", show_progress=False)
    with pytest.raises(StructretError, match="'bm25' reads texts"):
        structret.build_index(model, vectors, ids=["a", "b"], texts=["a", "b"], lexical="bm25", readings=["x", "y"])
    updated.add_lexical("bm25")  # another retriever: the item readings are not its documents
    assert updated.readings is None
    assert updated.lexical.retriever.score(["graphics"])[0].max() == 0  # the texts hold no aspect


def test_an_update_from_a_dataset_gives_the_added_functions_their_place(tmp_path, fresh_registry):
    import gzip

    import structret

    from test_hybrid import _code_rows

    data = _code_rows(tmp_path / "rows.jsonl.gz", n=12)
    index = structret.build_index(structret.load_model("minilm"), f"codesearchnet:{data}", split="test",
                                  lexical="bm25-project", show_progress=False)
    index.save(tmp_path / "idx")
    more = tmp_path / "more.jsonl.gz"
    code = "def zulu_helper(value):\n    return value"
    with gzip.open(more, "wt") as f:
        f.write(json.dumps({"repo": "r", "path": "vendored/quebec_tools.py", "func_name": "Quebec.zulu_helper",
                            "original_string": code, "code": code, "language": "python", "docstring": "a helper",
                            "code_tokens": code.split(), "docstring_tokens": ["a", "helper"],
                            "url": "new1", "partition": "test"}) + "\n")
    structret.update_index(tmp_path / "idx", add=f"codesearchnet:{more}", split="test", show_progress=False)
    updated = structret.load_index(tmp_path / "idx")
    scores = dict(zip(updated.lexical_ids, updated.lexical.retriever.score(["quebec tools"])[0]))
    assert scores["new1"] > 0 and sum(v > 0 for v in scores.values()) == 1  # by its path and class alone
    assert json.loads(updated.load_readings()["new1"])["path"] == "vendored/quebec_tools.py"


def test_terms_are_the_weighted_fields_tokens_as_one_list_and_need_no_fit():
    code = "def readConfigFile(path):\n    # the settings\n    return parse_settings(open(path).read())"
    only_name = FieldBM25Retriever(weights="name:1")
    assert only_name.terms([code]) == [["readconfigfile", "read", "config", "file"]]
    with_comments = FieldBM25Retriever(weights="name:1,comments:1")
    assert with_comments.terms([code])[0] == ["readconfigfile", "read", "config", "file", "settings"]
    # a query reads as every field's BM25 reads it: its words and their parts
    assert only_name.terms(["parseSettings of the file"], "query") == [["parsesettings", "parse", "settings", "file"]]
