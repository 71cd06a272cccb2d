import inspect
import json
import subprocess
import sys

import pytest

from structret import hookspecs
from structret.errors import PluginError
from structret.registry import FILE_KINDS, KINDS, PluginWarning, get_registry

BUILTIN_DIST = "structret"


def test_registry_is_built_once_and_cached(fresh_registry):
    assert get_registry() is get_registry()


def test_builtins_register_through_entry_points(fresh_registry):
    registry = get_registry()
    for kind, name in [("backbone", "minilm"), ("index", "hnsw"), ("dataset", "codesearchnet"),
                       ("retriever", "bm25"), ("miner", "python")]:
        entry = registry.get(kind, name)
        assert entry.distribution == BUILTIN_DIST
        assert isinstance(entry.target, str), "built-ins register lazily, so --help stays fast"


def test_every_hook_is_documented_and_has_a_kind():
    specs = {name for name, f in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(f, "structret_spec")}
    assert specs == set(KINDS.values())
    for name in specs:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert doc and ("Factory" in doc or "Target" in doc), f"{name} must say what the factory returns"


def test_every_kind_is_exercised_by_a_plugin_in_the_tests(make_plugin):
    # datasette-style: a hook nobody calls in a test is a hook that can silently break
    probe = ("class Probe:\n    name, role = 'probe', 'contrastive'  # an objective's rules read them at creation\n"
             "    def __init__(self, **options):\n        self.options = options\n"
             "    def __getattr__(self, name):  # has every attribute any kind needs\n        return None\n")
    # a recipe or suite is a TOML file the plugin ships
    files = "import pathlib\nTOML = pathlib.Path(__file__).with_name('probe.toml')\n"
    body = "\n".join(
        f"@hookimpl\ndef {hook}(register):\n    register('probe-{kind}', {'TOML' if kind in FILE_KINDS else 'Probe'}, "
        f"help='{kind} probe')\n"
        for kind, hook in KINDS.items()
    )
    package = make_plugin("probe-dist", "probe_plugin", "from structret import hookimpl\n" + files + probe + body)
    (package / "probe.toml").write_text('description = "a probe"\nobjective = "sda"\nlr = 1e-3\n')
    registry = get_registry()
    for kind in KINDS:
        entry = registry.get(kind, f"probe-{kind}")
        assert entry.distribution == "probe-dist"
        if kind in FILE_KINDS:
            assert entry.is_file and "a probe" in entry.read_text()
            with pytest.raises(PluginError, match="a file .* to read, not a factory"):
                registry.create(kind, f"probe-{kind}")
        else:
            assert registry.create(kind, f"probe-{kind}", a=1).options == {"a": 1}
    from structret.recipes import list_recipes, resolve_recipe

    assert "probe-recipe" in list_recipes()  # a third party's recipe is used by name like a built-in one
    assert resolve_recipe("probe-recipe").lr == 1e-3


def test_a_recipe_that_is_not_a_file_breaks_its_plugin_with_a_sentence(make_plugin):
    make_plugin("odd-dist", "odd_plugin", """
        from structret import hookimpl

        @hookimpl
        def register_recipes(register):
            register("odd", {"lr": 1e-3})
    """)
    with pytest.warns(PluginWarning, match="recipe 'odd': the target is a pathlib.Path to its TOML file, not dict"):
        registry = get_registry()
    assert not registry.has("recipe", "odd")


def test_an_error_in_core_is_not_blamed_on_a_plugin():
    # the datasets plugin registers protocol classes that live in core (structret.evaluation.protocols)
    from structret.api import plugin_of_error

    core_module = {"__name__": "structret.evaluation.protocols"}  # a frame of core's code, as a traceback reads it
    exec("def score():\n    raise RuntimeError('a bug in core')\n", core_module)
    with pytest.raises(RuntimeError) as raised:
        core_module["score"]()
    assert plugin_of_error(raised.value) is None
    assert "structret" not in get_registry().packages


def test_a_factory_with_an_options_parameter_is_handed_the_validated_model(make_plugin):
    """One declared model, two factories: the one with a parameter named ``options`` gets its instance
    (core's arguments and positional ones as always), the other one keyword per option, as before."""
    make_plugin("options-dist", "options_plugin", """
        from typing import Literal

        from structret import hookimpl
        from structret.plugin import Options


        class Reading(Options):
            \"\"\"Options of both readers.\"\"\"

            limit: int | None = None
            \"\"\"Rows to read.\"\"\"
            case: Literal["keep", "lower"] = "keep"
            \"\"\"What happens to the case.\"\"\"


        class Made:
            def __init__(self, **seen):
                self.seen = seen

            def __getattr__(self, name):  # has every attribute a dataset needs
                return None


        def whole(path, *, split=None, options: Reading):
            return Made(path=path, split=split, options=options)


        def by_name(path, *, split=None, limit=None, case="keep"):
            return Made(path=path, split=split, limit=limit, case=case)


        @hookimpl
        def register_datasets(register):
            register("whole", whole, options=Reading)
            register("by-name", by_name, options=Reading)
    """)
    from structret.errors import OptionError

    registry = get_registry()
    made = registry.create("dataset", "whole", "rows.jsonl", split="test", limit="5").seen
    assert made["path"] == "rows.jsonl" and made["split"] == "test"
    options = made["options"]
    assert type(options).__name__ == "Reading" and type(options).__module__ == "options_plugin"
    assert (options.limit, options.case) == (5, "keep")  # converted from text, default filled in
    assert registry.create("dataset", "by-name", "rows.jsonl", limit="5").seen == {
        "path": "rows.jsonl", "split": None, "limit": 5, "case": "keep"}
    for name in ("whole", "by-name"):
        with pytest.raises(OptionError, match=rf"dataset '{name}': case='upper': Input should be 'keep' or 'lower'"):
            registry.create("dataset", name, "rows.jsonl", case="upper")
        with pytest.raises(OptionError, match=rf"dataset '{name}' has no option 'limt'. Did you mean 'limit'\?"):
            registry.create("dataset", name, "rows.jsonl", limt=5)


def test_resolve_options_checks_keywords_from_python_with_the_same_model():
    """What a factory taking ``options`` does with keywords given from Python code."""
    from pydantic import Field

    from structret.errors import OptionError
    from structret.options import Options, resolve_options

    class Shape(Options):
        """Test options."""

        size: int = Field(3, ge=1)
        """How big."""
        name: str = "x"
        """What it is called."""

    class Bigger(Shape):
        """Its own defaults."""

        size: int = Field(9, ge=1)
        """Bigger."""

    assert resolve_options(Shape, None, {}, what="t") == Shape()
    assert resolve_options(Shape, None, {"size": "4"}, what="t") == Shape(size=4)
    bigger = Bigger(name="y")
    assert resolve_options(Shape, bigger, {}, what="t") is bigger  # as the registry made it
    laid_over = resolve_options(Shape, bigger, {"size": 2}, what="t")
    assert type(laid_over) is Bigger and (laid_over.size, laid_over.name) == (2, "y")
    with pytest.raises(OptionError, match=r"thing 't': size=0: Input should be greater than or equal to 1\. Its options: "
                                          r"size \(int, default 3\), name \(str, default 'x'\)"):
        resolve_options(Shape, None, {"size": 0}, what="thing 't'")
    with pytest.raises(OptionError, match="has no option 'sise'. Did you mean 'size'"):
        resolve_options(Shape, bigger, {"sise": 2}, what="t")
    with pytest.raises(OptionError, match="options must be a .*Shape, not dict"):
        resolve_options(Shape, {"size": 2}, {}, what="t")  # type: ignore[arg-type]


def test_a_factory_that_raises_or_returns_the_wrong_thing_is_named(make_plugin):
    make_plugin("shaky-dist", "shaky_plugin", """
        from structret import hookimpl
        from structret.errors import DataError

        def broken(**options):
            return {}["missing"]

        def wrong(**options):
            return "not an extractor"

        def polite(**options):
            raise DataError("a sentence for the user")

        @hookimpl
        def register_extractors(register):
            register("broken", broken)
            register("wrong", wrong)
            register("polite", polite)
    """)
    registry = get_registry()
    with pytest.raises(PluginError, match=r"extractor 'broken' \(plugin 'shaky_plugin' from distribution "
                                          r"'shaky-dist'\) failed while being created: KeyError"):
        registry.create("extractor", "broken")
    with pytest.raises(PluginError, match=r"extractor 'wrong' .*'shaky-dist'\) returned str, which has no extract"):
        registry.create("extractor", "wrong")
    from structret.errors import DataError

    with pytest.raises(DataError, match="^a sentence for the user$"):  # structret's own errors pass through
        registry.create("extractor", "polite")
    # and the other plugins are unaffected
    assert registry.create("extractor", "python-tokenize") is not None


def test_duplicate_name_fails_naming_both_distributions(make_plugin):
    make_plugin("dup-one", "dup_one", """
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            register("shared-name", dict)
    """)
    make_plugin("dup-two", "dup_two", """
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            register("other", dict, aliases=("shared-name",))
    """)
    with pytest.raises(PluginError) as err:
        get_registry()
    message = str(err.value)
    assert "dup-one" in message and "dup-two" in message and "shared-name" in message


def test_duplicate_of_a_builtin_name_fails_too(make_plugin):
    make_plugin("evil-flat", "evil_flat", """
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            register("flat", dict)
    """)
    with pytest.raises(PluginError, match="evil-flat"):
        get_registry()


def test_unknown_name_lists_known_names_and_closest_match(fresh_registry):
    with pytest.raises(PluginError) as err:
        get_registry().get("backbone", "minlm")
    message = str(err.value)
    assert "Did you mean 'minilm'?" in message
    assert "hf-encoder" in message and "t5" in message


def test_broken_plugin_is_isolated_and_named(make_plugin):
    make_plugin("broken-dist", "broken_plugin", "import a_module_that_does_not_exist\n")
    with pytest.warns(PluginWarning, match="broken-dist"):
        registry = get_registry()
    assert registry.has("backbone", "minilm")
    assert [b.distribution for b in registry.broken] == ["broken-dist"]


def test_plugin_whose_hook_raises_is_isolated_and_loads_none_of_it(make_plugin):
    make_plugin("raising-dist", "raising_plugin", """
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            register("half-loaded", dict)
        @hookimpl
        def register_backbones(register):
            raise RuntimeError("boom")
    """)
    with pytest.warns(PluginWarning, match="raising-dist.*boom.*none of what it registers is used"):
        registry = get_registry()
    assert registry.has("index", "flat")
    assert not registry.has("index", "half-loaded")  # "not loaded" means not loaded: all or nothing


def test_misspelled_hook_is_reported_not_ignored(make_plugin):
    make_plugin("typo-dist", "typo_plugin", """
        from structret import hookimpl
        @hookimpl
        def register_backbone(register):
            register("never-seen", dict)
    """)
    with pytest.warns(PluginWarning, match="register_backbone .did you mean register_backbones"):
        registry = get_registry()
    assert not registry.has("backbone", "never-seen")


def test_lazy_target_with_missing_dependency_names_the_module(make_plugin):
    make_plugin("needs-dist", "needs_plugin", """
        from structret import hookimpl
        @hookimpl
        def register_backbones(register):
            register("needy", "needy_impl_module_missing:Factory")
    """)
    entry = get_registry().get("backbone", "needy")
    # the plugin's own module is missing: reinstall the distribution, not a package named after the module
    with pytest.raises(PluginError, match=r"needs-dist.*needy_impl_module_missing.*pip install --force-reinstall "
                                          r"needs-dist"):
        entry.load()


def test_a_dependency_a_plugin_imports_is_named_with_what_to_install(make_plugin):
    make_plugin("deps-dist", "deps_plugin", """
        from structret import hookimpl
        @hookimpl
        def register_backbones(register):
            register("deps", "deps_plugin:Factory")
        def Factory():
            pass
        import sys
        if "deps_plugin_fail" in sys.modules:
            import not_installed_dependency_xyz
    """)
    import sys
    import types

    entry = get_registry().get("backbone", "deps")
    sys.modules.pop("deps_plugin", None)
    sys.modules["deps_plugin_fail"] = types.ModuleType("deps_plugin_fail")
    try:
        with pytest.raises(PluginError, match=r"needs the Python module 'not_installed_dependency_xyz'.*"
                                              r"pip install not-installed-dependency-xyz"):
            entry.load()
    finally:
        del sys.modules["deps_plugin_fail"]


def test_allow_list_limits_loading_to_named_distributions(make_plugin, monkeypatch):
    make_plugin("extra-dist", "extra_plugin", """
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            register("extra-index", dict)
    """)
    assert get_registry().has("index", "extra-index")

    from structret.registry import reset_registry

    monkeypatch.setenv("STRUCTRET_LOAD_PLUGINS", "extra_dist")  # normalized like pip names
    reset_registry()
    registry = get_registry()
    assert registry.has("index", "extra-index") and not registry.has("index", "flat")

    monkeypatch.setenv("STRUCTRET_LOAD_PLUGINS", "structret")
    reset_registry()
    registry = get_registry()
    assert registry.has("index", "flat") and not registry.has("index", "extra-index")


HEAVY = ["torch", "transformers", "tree_sitter", "spacy", "nltk", "hnswlib", "numpy", "bm25s", "pyarrow",
         "matplotlib"]


@pytest.mark.parametrize("argv", [["--help"], ["plugins"], ["plugins", "--kind", "backbone"]])
def test_help_and_plugins_import_no_heavy_library(argv):
    code = (
        "import sys, json\n"
        "from structret.cli import cli\n"
        f"try:\n    cli.main({argv!r}, prog_name='structret', standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
