import sys
import textwrap

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
