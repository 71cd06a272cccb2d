import os
import sys
import tempfile
import textwrap

# dtype="auto" follows the CPU's bf16 support; pin it to "no" for the whole run (subprocesses
# inherit it) so that fp32 references hold on every CPU. test_backbones.py forces it both ways.
os.environ["STRUCTRET_CPU_BF16"] = "0"
# what the run caches (vectors, exports, precision timings, verification stamps) goes to a folder of
# its own, never the user's ~/.cache/structret; tests that care set their own
os.environ["STRUCTRET_CACHE"] = tempfile.mkdtemp(prefix="structret-tests-")

import pytest

from structret.registry import reset_registry


@pytest.fixture
def fresh_registry():
    """The registry rebuilt for this test and forgotten after it."""
    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def make_plugin(tmp_path, monkeypatch, fresh_registry):
    """Install a real (tiny) plugin distribution: a module plus a .dist-info with entry points.

    importlib.metadata finds it on sys.path exactly as it finds a pip-installed plugin.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def make(dist: str, module: str, source: str, entry_name: str | None = None):
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[structret]\n{entry_name or module} = {module}\n")
        sys.modules.pop(module, None)
        reset_registry()
        return site

    yield make


# --- hypothesis profiles (tests/test_properties.py) ------------------------------------------
# "fast" (the default) keeps a plain `pytest` run short; "thorough" tries 10,000 inputs per test:
#   HYPOTHESIS_PROFILE=thorough python -m pytest tests/test_properties.py --hypothesis-show-statistics
# No example database: nothing is written into the working tree.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is in the `test` extra; without it only test_properties.py is skipped
    pass
else:
    _SLOW_INPUTS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
    settings.register_profile("fast", max_examples=15, deadline=None, database=None,
                              suppress_health_check=_SLOW_INPUTS)
    settings.register_profile("thorough", max_examples=10_000, deadline=None, database=None,
                              suppress_health_check=_SLOW_INPUTS)
    import os as _os

    settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE", "fast"))
