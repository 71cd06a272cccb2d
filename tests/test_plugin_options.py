"""Plugins own their options: declared next to the plugin, one recipe table each, set with
--set NAME.OPTION, listed by `structret plugins --options`, recorded with a run and checked on resume."""

import subprocess
import sys
import warnings

import pytest
from click.testing import CliRunner

from structret.cli import cli
from structret.options import describe, plain
from structret.recipes import (
    CORE_FIELDS,
    RecipeError,
    RecipeWarning,
    read_recipe,
    recipe_to_toml,
    resolve_recipe,
    write_recipe,
)
from structret.registry import get_registry

# what core used to carry for one plugin or another; none of it is a core field any more
MOVED = ("noise_density", "mean_span_length", "extractor", "mlm_input", "content_mask_ratio", "query_mask_ratio",
         "aspect_mask_ratio", "mutual_weight", "aspects", "similarity", "temperature", "backbone_options",
         "data_options")
# every corruption objective's LM-head warm-up options (structret.options.LMWarmupOptions), at their defaults
WARMUP = {"lm_warmup": "auto", "lm_warmup_auto_steps": 200, "lm_warmup_lr": 0.001}


def test_core_fields_name_no_plugin_option():
    assert not set(MOVED) & set(CORE_FIELDS)


def test_every_shipped_recipe_resolves_without_warnings():
    from structret.recipes import list_recipes

    with warnings.catch_warnings():
        warnings.simplefilter("error", RecipeWarning)
        for name in list_recipes():
            recipe = resolve_recipe(name)
            assert recipe.plugins, name


def test_a_table_and_a_set_reach_the_plugin_with_every_default_filled(tmp_path):
    file = tmp_path / "r.toml"
    file.write_text('objective = "sda+span-mask"\nbackbone = "codet5-base"\n[span-mask]\nnoise_density = 0.3\n')
    recipe = resolve_recipe(str(file), {"span-mask.mean-span-length": "5", "sda.temperature": "0.5"})
    assert recipe.plugins["span-mask"] == {"noise_density": 0.3, "mean_span_length": 5.0, **WARMUP,
                                           "contrastive_input": "masked"}
    assert recipe.plugins["sda"] == {"similarity": "dot", "temperature": 0.5}
    assert recipe.plugins["codet5-base"]["max_length"] == 256  # the backbone's table, defaults filled in


def test_an_option_alone_goes_to_every_plugin_of_the_run_that_has_it():
    recipe = resolve_recipe("attempt", {"aspects": "brand,color", "backbone": "minilm"})
    assert recipe.plugins["aspect-mlm"]["aspects"] == ["brand", "color"]
    assert recipe.plugins["aspects"]["aspects"] == ["brand", "color"]  # the text format's table too


@pytest.mark.parametrize("overrides, words", [
    ({"mep.nosuch": 1}, ["mep", "no option 'nosuch'", "extractor"]),
    ({"mep.extractor": "nosuch"}, ["unknown extractor 'nosuch'", "tree-sitter"]),
    ({"sda.temperature": "-1"}, ["temperature", "greater than 0"]),
    ({"sda.similarity": "l2"}, ["similarity", "'dot' or 'cos'"]),
    ({"span-mask.noise_density": 0.3}, ["'span-mask' is not a plugin of this run", "objective mep"]),
    ({"tempreture": 0.5}, ["unknown recipe field 'tempreture'", "Did you mean 'temperature'", "mep.extractor",
                           "NAME.OPTION"]),
    ({"lr": "-1"}, ["lr", "greater than 0"]),
])
def test_bad_settings_name_the_plugin_and_its_options(overrides, words):
    with pytest.raises(RecipeError) as error:
        resolve_recipe("santa-code", overrides)
    for word in words:
        assert word in str(error.value)


def test_a_table_for_a_plugin_the_run_does_not_use_is_dropped_with_a_warning(tmp_path):
    file = tmp_path / "r.toml"
    file.write_text('objective = "sda"\n[mep]\nextractor = "tree-sitter"\n')
    with pytest.warns(RecipeWarning, match="options for 'mep' are not used"):
        recipe = resolve_recipe(str(file))
    assert "mep" not in recipe.plugins
    file.write_text('objective = "sda"\n[nosuch-plugin]\nx = 1\n')
    with pytest.raises(RecipeError, match=r"\[nosuch-plugin\] names no installed plugin"):
        resolve_recipe(str(file))


def test_a_presets_table_dropped_by_an_override_goes_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecipeWarning)
        recipe = resolve_recipe("santa-code", {"objective": "sda"})  # the preset's [mep] is not for this run
    assert "mep" not in recipe.plugins and recipe.plugins["sda"]["similarity"] == "dot"


def test_old_flat_recipes_still_load_with_a_deprecation_warning(tmp_path):
    # what a run wrote before plugin tables: every field at the top level, None as ""
    file = tmp_path / "recipe.toml"
    file.write_text('objective = "sda+mep"\nbackbone = "minilm"\nbackbone_options = "informed_layers=1"\n'
                    'similarity = "cos"\ntemperature = 0.05\nextractor = "tree-sitter"\nnoise_density = 0.15\n'
                    'aspect_mask_ratio = ""\ntext_format = ""\naspects = ""\nmodel = ""\n')
    with pytest.warns(RecipeWarning) as caught:
        recipe = resolve_recipe(str(file))
    assert recipe.plugins["sda"] == {"similarity": "cos", "temperature": 0.05}
    assert recipe.plugins["mep"] == {"extractor": "tree-sitter", "entity_rate": 1.0, **WARMUP,
                                     "contrastive_input": "masked"}
    assert recipe.plugins["minilm"]["informed_layers"] == 1
    messages = " ".join(str(w.message) for w in caught)
    assert "write it in the [sda] table" in messages and "[minilm] table" in messages
    assert "noise_density" in messages  # an option of span-mask, which this run does not use: said, not silent


def test_the_written_recipe_reads_back_equal(tmp_path):
    recipe = resolve_recipe("mtbert-c", {"backbone": "minilm", "mlm.aspect_mask_ratio": 0.5,
                                         "model": None, "data": "esci:somewhere"})
    write_recipe(recipe, tmp_path / "recipe.toml")
    text = (tmp_path / "recipe.toml").read_text()
    assert "[mlm]" in text and "[aspect-class]" in text and "[aspects]" in text
    assert '[esci]\nmax_field_chars = 1000000\nversion = "small"\nlocale = "us"\n' in text  # the reader's too
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecipeWarning)
        again = read_recipe(tmp_path / "recipe.toml")
    assert again == recipe
    assert recipe_to_toml(again) == text


def test_plugins_options_lists_types_defaults_and_docs():
    result = CliRunner().invoke(cli, ["plugins", "--options", "mep"])
    assert result.exit_code == 0, result.output
    assert "extractor  (str, default 'auto')" in result.output
    assert "Which entities are masked" in result.output and "--set mep.extractor=" in result.output
    result = CliRunner().invoke(cli, ["plugins", "--options", "minilm"])
    assert "pooling  ('cls' | 'mean', default 'mean')" in result.output  # minilm's own default, not HFEncoder's
    result = CliRunner().invoke(cli, ["plugins", "--options", "mepp"])
    assert result.exit_code == 1 and "Did you mean 'mep'" in result.output


def test_plugins_options_of_a_recipe_suite_or_command_says_what_it_is():
    result = CliRunner().invoke(cli, ["plugins", "--options", "santa-code"])
    assert result.output.startswith("recipe santa-code (distribution structret): ")
    assert 'objective = "sda+mep"' in result.output  # the file itself
    result = CliRunner().invoke(cli, ["plugins", "--options", "coir", "--kind", "suite"])
    assert "structret bench --suite coir --data-root PATH" in result.output
    result = CliRunner().invoke(cli, ["plugins", "--options", "plot"])
    assert "'structret plot --help' lists its options" in result.output


# kinds whose every plugin declares an options model (miners take none; protocols are built by core)
DECLARING_KINDS = ("dataset", "backbone", "index", "retriever", "extractor", "linearizer", "objective")


def test_every_plugin_declares_its_options():
    """Built-in and the example plugin's: one mechanism documents and validates every option."""
    registry = get_registry()
    assert registry.has("extractor", "regex-identifiers"), "the example plugin (plugins/example) is not installed"
    undeclared = [e.what for e in registry.all() if e.kind in DECLARING_KINDS and e.options is None]
    assert not undeclared, f"no options model registered: {undeclared}"


def test_every_option_model_is_documented_and_matches_its_factory():
    """A declared option the factory does not take would fail at creation; a default that differs
    from the factory's own would depend on the caller (the registry passes every option). A factory
    taking ``options`` is handed the model's instance: its annotation names that model (or a base)."""
    import inspect
    import typing

    for entry in get_registry().all():
        if entry.options is None:
            continue
        model = entry.options_model()
        for info in describe(model):
            assert info.doc, f"{entry.kind} {entry.name}: option {info.name} has no docstring"
        factory = entry.load()
        parameters = inspect.signature(factory).parameters
        if "options" in parameters:
            annotation = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)["options"]
            taken = [t for t in typing.get_args(annotation) or (annotation,) if t is not type(None)]
            assert any(issubclass(model, t) for t in taken), f"{entry.what}: is handed {model.__name__}, takes {annotation}"
            continue
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        assert not takes_any, f"{entry.what}: declares its options, so its factory takes them by name"
        for name, field in model.model_fields.items():
            assert name in parameters, f"{entry.what}: option {name} is not a factory parameter"
            own = parameters[name].default
            if own is not inspect.Parameter.empty:
                declared = field.get_default(call_default_factory=True)
                assert plain(declared) == plain(own), f"{entry.what}: {name} defaults to {declared!r}, its factory's to {own!r}"


@pytest.mark.parametrize("reader", ["codesearchnet", "adv", "esci", "esci-santa-pretrain", "debian-packages",
                                    "beir", "tevatron"])
def test_a_reader_refuses_an_unknown_option_listing_its_own(tmp_path, reader):
    from structret.datasets import load_dataset
    from structret.errors import PluginError

    with pytest.raises(PluginError) as error:
        load_dataset(f"{reader}:{tmp_path}", max_chars=5)  # refused before the path is looked at
    assert f"dataset '{reader}' has no option 'max_chars'" in str(error.value)
    assert "Did you mean 'max_field_chars'?" in str(error.value)
    for option in describe(get_registry().get("dataset", reader).options_model()):
        assert f"{option.name} ({option.type}, default {option.default!r})" in str(error.value)


def test_a_reader_option_is_converted_by_its_model(tmp_path):
    from structret.datasets import load_dataset
    from structret.errors import DataError, PluginError

    with pytest.raises(PluginError, match=r"locale='fr': Input should be 'us', 'es', 'jp' or 'all'"):
        load_dataset(f"esci:{tmp_path}", locale="fr")
    with pytest.raises(DataError, match="does not exist"):  # JP is jp: the options pass, the path is read
        load_dataset(f"esci:{tmp_path / 'nowhere'}", locale="JP", max_field_chars=2e6)
    with pytest.raises(DataError, match="'path' is not a reader option.*--data FORMAT:PATH"):
        load_dataset(f"esci:{tmp_path}", path="elsewhere")


def test_plugins_options_documents_a_reader():
    result = CliRunner().invoke(cli, ["plugins", "--options", "esci"])
    assert result.exit_code == 0, result.output
    for line in ("locale  ('us' | 'es' | 'jp' | 'all', default 'us')", "version  ('small' | 'large', default 'small')",
                 "categories  (str | None, default None)", "max_field_chars  (int, default 1000000)",
                 "Which market's queries and products", "--set esci.max_field_chars=VALUE"):
        assert line in result.output
    assert "checks them itself" not in result.output


def test_a_bad_option_fails_in_well_under_a_second_of_work():
    """The CLI refuses a typo before importing torch: the recipe is checked first."""
    code = ("import sys\nfrom structret.cli import main\nsys.argv=['structret','train','--recipe','santa-code',"
            "'--set','mep.nosuch=1']\ntry:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "no option 'nosuch'" in out.stderr
    assert out.stdout.split() == ["exit", "1", "False"]


def test_listing_every_plugins_options_imports_nothing_heavy():
    """Option models are lazy "module:Class" strings in modules that import no plugin code."""
    code = ("import sys\nfrom structret.registry import get_registry\nfrom structret.options import describe\n"
            "for e in get_registry().all():\n    if e.options is not None:\n        describe(e.options_model())\n"
            "heavy = ('torch', 'numpy', 'pyarrow', 'tree_sitter', 'transformers', 'hnswlib', 'bm25s', 'nltk', "
            "'spacy', 'pymilvus')\nprint(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]"]


def test_command_line_options_stay_text_until_the_options_model_types_them():
    """query_prefix=1 is the prefix "1" (a str option), max_length=32 the number (an int option), as --set gives them."""
    from structret.registry.keyvalue import parse_options
    from structret.registry import get_registry

    given = parse_options(["query_prefix=1", "max_length=32", "normalize=false"])
    assert given == {"query_prefix": "1", "max_length": "32", "normalize": "false"}
    checked = get_registry().get("backbone", "minilm").validate_options(given)
    assert checked["query_prefix"] == "1" and checked["max_length"] == 32 and checked["normalize"] is False
