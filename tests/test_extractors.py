"""Entity extractors (SANTA's masked entity prediction): code identifiers and product nouns."""

from __future__ import annotations

import sys
import types
from collections import Counter

import pytest

from structret.errors import DataError, PluginError
from structret.extraction import extract_file, format_entities
from structret.records import Entity, ItemRecord
from structret.registry import get_registry
from structret_code.extractors import PythonTokenize, TreeSitterIdentifiers
from structret_text.nouns import NltkNouns, SpacyNouns, TitleOverlap


def texts(text: str, entities: list[Entity]) -> list[str]:
    """The entity texts, after checking every entity is its own span and they come in text order."""
    for e in entities:
        assert text[e.start : e.end] == e.text, e
    assert [e.start for e in entities] == sorted(e.start for e in entities)
    return [e.text for e in entities]


# --- code: one realistic function per language, non-ASCII before identifiers ------------------

PYTHON = '''def normalize_price(raw: str, currency="€") -> float:
    """Parse « 12,50 € » into 12.5."""
    cleaned = raw.replace(currency, "").strip()  # ß, 日本
    return float(cleaned.replace(",", "."))
'''

GO = """func (c *Cache) Get(key string) (value []byte, ok bool) {
\t// Größe prüfen — 日本語
\tc.mu.RLock()
\tdefer c.mu.RUnlock()
\tentry, ok := c.items[key]
\treturn entry.data, ok
}"""

JAVA = """public static String greet(User user) {
    // Grüße, «Gäste»
    String name = user.getName();
    return String.format("¡Hola, %s!", name);
}"""

JAVASCRIPT = """function formatPrice(amount, { currency, locale }) {
  // ¥ / € — formatage
  const fmt = new Intl.NumberFormat(locale, { style: "currency", currency });
  return fmt.format(amount);
}"""

# as CodeSearchNet stores a method: modifiers, no <?php tag, no class around it
PHP = """public function findByEmail($email)
{
    // Überprüfung — «ß»
    $user = $this->repository->findOneBy(['email' => strtolower($email)]);
    return $user ?: null;
}"""

RUBY = """def total_price(items)
  # Préstamo — ¥ 日本
  items.sum { |item| item.price * Tax::RATE }
end"""

EXPECTED = {
    "python": (PYTHON, ["normalize_price", "raw", "str", "currency", "float", "cleaned", "raw", "replace",
                        "currency", "strip", "float", "cleaned", "replace"]),
    "go": (GO, ["c", "Cache", "Get", "key", "string", "value", "byte", "ok", "bool", "c", "mu", "RLock",
                "c", "mu", "RUnlock", "entry", "ok", "c", "items", "key", "entry", "data", "ok"]),
    "java": (JAVA, ["String", "greet", "User", "user", "String", "name", "user", "getName", "String",
                    "format", "name"]),
    "javascript": (JAVASCRIPT, ["formatPrice", "amount", "currency", "locale", "fmt", "Intl", "NumberFormat",
                                "locale", "style", "currency", "fmt", "format", "amount"]),
    "php": (PHP, ["findByEmail", "email", "user", "this", "repository", "findOneBy", "strtolower", "email",
                  "user"]),
    "ruby": (RUBY, ["total_price", "items", "items", "sum", "item", "item", "price", "Tax", "RATE"]),
}


@pytest.mark.parametrize("language", sorted(EXPECTED))
def test_tree_sitter_identifiers_of_each_language(language):
    code, expected = EXPECTED[language]
    extractor = TreeSitterIdentifiers()
    assert texts(code, extractor.extract(code, language=language)) == expected
    assert not extractor.failures


def test_tree_sitter_offsets_are_characters_not_bytes():
    entities = TreeSitterIdentifiers("go").extract(GO)
    # "entry" comes after "Größe prüfen — 日本語": 13 more bytes than characters before it
    entry = next(e for e in entities if e.text == "entry")
    assert entry.start == GO.index("entry") != GO.encode().index(b"entry")
    assert [(e.text, e.kind) for e in entities[:5]] == [
        ("c", "identifier"), ("Cache", "type_identifier"), ("Get", "field_identifier"),
        ("key", "identifier"), ("string", "type_identifier"),
    ]


def test_tree_sitter_node_types():
    # a package name is a package_identifier in a type; in a call tree-sitter cannot tell it from a variable
    go = TreeSitterIdentifiers("go").extract("func run(ctx context.Context) { fmt.Println(ctx) }")
    assert [(e.text, e.kind) for e in go] == [
        ("run", "identifier"), ("ctx", "identifier"), ("context", "package_identifier"),
        ("Context", "type_identifier"), ("fmt", "identifier"), ("Println", "field_identifier"),
        ("ctx", "identifier"),
    ]
    js = TreeSitterIdentifiers("javascript").extract(JAVASCRIPT)
    assert {e.kind for e in js} == {
        "identifier", "property_identifier", "shorthand_property_identifier",
        "shorthand_property_identifier_pattern",
    }
    ruby = TreeSitterIdentifiers("ruby").extract(RUBY)
    assert [e.text for e in ruby if e.kind == "constant"] == ["Tax", "RATE"]
    # node_types= overrides the table: here only Java's type names
    java = TreeSitterIdentifiers("java", node_types="type_identifier").extract(JAVA)
    assert [e.text for e in java] == ["String", "User", "String"]


def test_method_snippets_parse_inside_a_class_and_whole_php_files():
    extractor = TreeSitterIdentifiers()
    js_method = "async load(url) {\n  return await this.fetch(url);\n}"
    assert texts(js_method, extractor.extract(js_method, "javascript")) == ["load", "url", "fetch", "url"]
    constructor = "public Point(int x) { this.x = x; }"
    assert texts(constructor, extractor.extract(constructor, "java")) == ["Point", "x", "x", "x"]
    php_file = "<?php\n// café\nfunction slug($s) { return strtolower($s); }\n"
    assert texts(php_file, extractor.extract(php_file, "php")) == ["slug", "s", "strtolower", "s"]
    assert not extractor.failures


def test_python_tokenize_names():
    assert texts(PYTHON, PythonTokenize().extract(PYTHON)) == EXPECTED["python"][1]


def test_python_tokenize_offsets_across_multiline_strings_tabs_and_crlf():
    code = 'def f(a):\r\n\tdoc = """Grüße\n\tmehr « »"""\r\n\treturn g(a, doc)  # ü\r\n'
    entities = PythonTokenize().extract(code)
    assert texts(code, entities) == ["f", "a", "doc", "g", "a", "doc"]
    assert entities[3] == Entity(code.index("g(a"), code.index("g(a") + 1, "g", "identifier")
    bom = "\ufeffimport os\nos.getcwd()\n"
    assert texts(bom, PythonTokenize().extract(bom)) == ["os", "os", "getcwd"]


def test_python_tokenize_soft_keywords_are_names_and_f_strings_are_strings():
    code = 'match = re.match(p, s)\ntype = _ = f"{match.group()}"\n'
    assert texts(code, PythonTokenize().extract(code)) == ["match", "re", "match", "p", "s", "type", "_"]


def test_python_tokenize_and_tree_sitter_differ_on_fstrings_and_soft_keywords():
    code = '''@functools.lru_cache(maxsize=None)
def describe(self, shape, *, verbose=False):
    label = f"{shape.name}: {len(shape.points)} points"
    match shape.kind:
        case "circle":
            area = math.pi * shape.r ** 2
        case _:
            area = None
    return label if verbose else area
'''
    lexical = texts(code, PythonTokenize().extract(code))
    parsed = texts(code, TreeSitterIdentifiers("python").extract(code))
    # both take attribute names, decorators and keyword arguments; tokenize also takes the soft
    # keywords of a match statement, tree-sitter also the names inside the f-string
    assert Counter(lexical) - Counter(parsed) == Counter({"case": 2, "match": 1, "_": 1})
    assert Counter(parsed) - Counter(lexical) == Counter({"shape": 2, "name": 1, "len": 1, "points": 1})
    assert {"lru_cache", "maxsize", "pi", "kind"} <= set(lexical) & set(parsed)
    # Python 2 statements: print and exec are names to tokenize, keywords to tree-sitter
    py2 = "def main(args):\n    print 'usage: %s' % args[0]\n    exec code in env\n"
    assert texts(py2, PythonTokenize().extract(py2)) == ["main", "args", "print", "args", "exec", "code", "env"]
    assert texts(py2, TreeSitterIdentifiers("python").extract(py2)) == ["main", "args", "args", "code", "env"]


def test_unparsable_code_gives_no_entities_and_is_counted():
    tokenize = PythonTokenize()
    assert tokenize.extract('def f():\n    s = """never closed\n') == []
    assert tokenize.extract("if x:\n        a = 1\n    b = 2\n") == []
    assert tokenize.extract("x = 1\n") != []
    assert sum(tokenize.failures.values()) == 2
    assert any("EOF in multi-line string" in reason for reason in tokenize.failures)
    assert any(reason.startswith("IndentationError") for reason in tokenize.failures)

    trees = TreeSitterIdentifiers()
    assert trees.extract("public void broken( { return; }", "java") == []
    assert trees.extract("def f(:\n    pass\n", "python") == []
    assert trees.failures == Counter({"java: tree-sitter could not parse it": 1,
                                      "python: tree-sitter could not parse it": 1})


def test_missing_grammar_and_missing_language_are_clear_errors():
    with pytest.raises(PluginError, match=r"pip install tree-sitter-cobol"):
        TreeSitterIdentifiers("cobol")
    with pytest.raises(PluginError, match=r"pip install tree-sitter-cobol"):
        TreeSitterIdentifiers().extract("PROCEDURE DIVISION.", language="cobol")
    with pytest.raises(PluginError, match=r"needs the language"):
        TreeSitterIdentifiers().extract("x = 1")
    with pytest.raises(PluginError, match=r"Python only.*tree-sitter"):
        PythonTokenize().extract("func main() {}", language="go")


def test_any_installed_grammar_works_through_the_generic_node_types(monkeypatch):
    import tree_sitter_java

    # a grammar package structret has no table for (here: Java's grammar under another name)
    fake = types.ModuleType("tree_sitter_javalike")
    fake.language = tree_sitter_java.language
    monkeypatch.setitem(sys.modules, "tree_sitter_javalike", fake)
    code = "java.util.List<String> names = new java.util.ArrayList<>();"
    entities = TreeSitterIdentifiers("javalike").extract(code)
    # scoped_identifier (java.util) is a *identifier type too, but only its leaves are names
    assert texts(code, entities) == ["java", "util", "List", "String", "names", "java", "util", "ArrayList"]


def test_code_extractors_through_the_registry():
    registry = get_registry()
    assert texts(RUBY, registry.create("extractor", "tree-sitter", language="ruby").extract(RUBY))[:2] == [
        "total_price", "items",
    ]
    assert registry.create("extractor", "python-tokenize").extract("a.b")[1].text == "b"


# --- products ---------------------------------------------------------------------------------

TITLE = "Naturtint Permanent Hair Color 5N Light Chestnut Brown"
DESCRIPTION = (
    "A permanent hair color without ammonia from Naturtint. Naturtint Hair Dye gives a light "
    "chestnut brown shade and covers grey hair."
)
# what a Penn Treebank tagger says about these words (as NLTK's does on such text)
TAGS = {
    "Naturtint": "NNP", "Permanent": "NNP", "Hair": "NNP", "Color": "NNP", "5N": "CD", "Light": "NNP",
    "Chestnut": "NNP", "Brown": "NNP", "Dye": "NNP", "A": "DT", "a": "DT", "from": "IN", "permanent": "JJ",
    "without": "IN", "gives": "VBZ", "light": "JJ", "brown": "JJ", "and": "CC", "covers": "VBZ",
    "grey": "JJ", ".": ".",
}


def dictionary_tagger(tokens):
    return [(token, TAGS.get(token, "NN")) for token in tokens]


def test_nltk_nouns_rule_with_an_injected_tagger():
    entities = NltkNouns(tagger=dictionary_tagger).extract(DESCRIPTION, title=TITLE)
    assert [(e.text, e.kind) for e in entities] == [
        ("permanent", "title-match"),
        ("hair", "title-match"),
        ("color", "title-match"),
        ("Naturtint", "NNP"),  # "Naturtint." at a sentence end is a word and a period, as in word_tokenize
        ("Naturtint", "NNP"),
        ("Hair", "NNP"),
        ("Dye", "NNP"),
        ("light", "title-match"),
        ("chestnut", "title-match"),
        ("brown", "title-match"),
        ("hair", "title-match"),
    ]
    texts(DESCRIPTION, entities)
    # without the title only the description's own proper nouns count
    alone = NltkNouns(tagger=dictionary_tagger).extract(DESCRIPTION)
    assert [e.text for e in alone] == ["Naturtint", "Naturtint", "Hair", "Dye"]
    item = ItemRecord(id="B00", title=TITLE, content=DESCRIPTION)
    assert NltkNouns(tagger=dictionary_tagger).extract_record(item) == entities


def test_nltk_nouns_without_tagger_data_says_how_to_install_it():
    import nltk

    try:
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
        pytest.skip("NLTK's tagger data is installed here")
    except LookupError:
        pass
    with pytest.raises(PluginError) as info:
        NltkNouns()
    message = str(info.value)
    assert "python -m nltk.downloader averaged_perceptron_tagger_eng" in message
    assert "NLTK_DATA" in message and "title-overlap" in message


def test_a_tagger_that_drops_tokens_is_refused():
    with pytest.raises(PluginError, match="2 tags for 3 tokens"):
        NltkNouns(tagger=lambda tokens: [(t, "NN") for t in tokens[:2]]).extract("one two three")


@pytest.fixture(scope="module")
def blank_english():
    spacy = pytest.importorskip("spacy")
    return spacy.blank("en")


def test_spacy_nouns_with_docs_carrying_given_tags(blank_english):
    from spacy.tokens import Doc

    def nlp(text):
        # spaCy's own tokens, with the tags a trained tagger would give
        tokens = blank_english.make_doc(text)
        return Doc(
            blank_english.vocab,
            words=[t.text for t in tokens],
            spaces=[bool(t.whitespace_) for t in tokens],
            tags=[TAGS.get(t.text, "NN") for t in tokens],
        )

    entities = SpacyNouns(nlp=nlp).extract(DESCRIPTION, title=TITLE)
    assert [(e.text, e.kind) for e in entities] == [
        (e.text, e.kind) for e in NltkNouns(tagger=dictionary_tagger).extract(DESCRIPTION, title=TITLE)
    ]
    texts(DESCRIPTION, entities)


def test_spacy_nouns_loads_a_pipeline_from_a_path(blank_english, tmp_path):
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("tagger")
    sentence, tags = "Naturtint Hair Dye is gentle", ["NNP", "NNP", "NNP", "VBZ", "JJ"]
    examples = [Example(nlp.make_doc(sentence), Doc(nlp.vocab, words=sentence.split(), tags=tags))]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):  # enough for the tagger to learn this one sentence by heart
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "tagger")
    loaded = SpacyNouns(model=str(tmp_path / "tagger"))
    assert [e.text for e in loaded.extract(sentence)] == ["Naturtint", "Hair", "Dye"]

    blank_english.to_disk(tmp_path / "no-tagger")
    with pytest.raises(PluginError, match="has no tagger"):
        SpacyNouns(model=str(tmp_path / "no-tagger"))


def test_spacy_nouns_without_the_pipeline_says_how_to_install_one():
    import spacy.util

    if spacy.util.is_package("en_core_web_sm"):
        pytest.skip("en_core_web_sm is installed here")
    with pytest.raises(PluginError) as info:
        SpacyNouns()
    message = str(info.value)
    assert "python -m spacy download en_core_web_sm" in message
    assert "title-overlap" in message and "path" in message


def test_title_overlap():
    extractor = TitleOverlap()
    entities = extractor.extract(DESCRIPTION, title=TITLE)
    # "a" is a stop word and too short; matching ignores case
    assert texts(DESCRIPTION, entities) == [
        "permanent", "hair", "color", "Naturtint", "Naturtint", "Hair", "light", "chestnut", "brown", "hair",
    ]
    assert {e.kind for e in entities} == {"title-match"}
    assert extractor.extract(DESCRIPTION) == []
    assert TitleOverlap(stopwords=["hair"]).extract("Hair and HAIR", title="hair and more") == [
        Entity(5, 8, "and", "title-match"),
    ]
    item = ItemRecord(id="B00", title=TITLE, content=DESCRIPTION)
    assert get_registry().create("extractor", "title-overlap").extract_record(item) == entities


# --- extract_file and format_entities ----------------------------------------------------------


def test_format_entities():
    text = "a = compute(a)\n"
    entities = [Entity(0, 1, "a", "identifier"), Entity(4, 11, "compute", "identifier"),
                Entity(12, 13, "a", "identifier")]
    assert format_entities(text, entities) == (
        "0-1    identifier  a\n"
        "4-11   identifier  compute\n"
        "12-13  identifier  a\n"
        "3 entities, 2 distinct, 9 of 15 characters covered (60.0%)"
    )
    assert format_entities("", []) == "0 entities, 0 distinct, 0 of 0 characters covered (0.0%)"


def test_extract_file_reads_runs_and_counts(tmp_path):
    path = tmp_path / "cache.go"
    path.write_text(GO, encoding="utf-8")
    result = extract_file(path, "tree-sitter")  # the language comes from the suffix
    assert result.language == "go" and result.text == GO
    assert [e.text for e in result.entities] == EXPECTED["go"][1]
    assert (result.n_entities, result.n_distinct) == (23, 15)
    lines = result.format().splitlines()
    assert lines[0] == "6-7      identifier        c"  # (c *Cache)
    assert lines[-1] == f"23 entities, 15 distinct, {result.covered_chars} of {len(GO)} characters covered " \
                        f"({result.coverage:.1%})"

    product = tmp_path / "description.txt"
    product.write_text(DESCRIPTION, encoding="utf-8")
    overlap = extract_file(product, "title-overlap", title=TITLE)
    assert overlap.n_entities == 10 and overlap.language is None
    with pytest.raises(PluginError, match="takes no title"):
        extract_file(path, "tree-sitter", title=TITLE)


def test_extract_file_errors_and_failures(tmp_path):
    latin1 = tmp_path / "legacy.py"
    latin1.write_bytes("# caf\xe9\nx = 1\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"legacy\.py is not UTF-8.*0xe9.*line 1"):
        extract_file(latin1, "python-tokenize")
    with pytest.raises(DataError, match="no such file"):
        extract_file(tmp_path / "missing.py", "python-tokenize")

    broken = tmp_path / "broken.py"
    broken.write_text('s = """open\n', encoding="utf-8")
    result = extract_file(broken, "python-tokenize")
    assert result.entities == [] and sum(result.failures.values()) == 1
    assert "note: python-tokenize could not read" in result.format()
    assert "EOF in multi-line string" in result.format()
