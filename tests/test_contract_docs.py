"""The plugin contract is written in docs/plugins.md, and the page cannot fall behind the code."""

from __future__ import annotations

import inspect
from pathlib import Path

from structret import contract_docs, contracts, hookspecs
from structret.registry import KINDS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_the_page_holds_the_reference_generated_from_the_code():
    page = PAGE.read_text(encoding="utf-8")
    assert contract_docs.BEGIN in page, "run: python -m structret.contract_docs --write docs/plugins.md"
    assert contract_docs.replaced(page) == page, (
        "docs/plugins.md's contract reference is out of date with structret/hookspecs.py or contracts.py; "
        "run: python -m structret.contract_docs --write docs/plugins.md")


def test_every_hook_is_documented_with_its_signature():
    page = PAGE.read_text(encoding="utf-8")
    hooks = [(n, h) for n, h in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("register_")]
    assert len(hooks) == len(KINDS) == 13
    for name, hook in hooks:
        assert inspect.cleandoc(hook.__doc__ or "").count("\n") >= 2, f"{name} has no real docstring"
        assert f"`{name}{inspect.signature(hook)}`" in page


def test_every_protocol_member_rule_option_and_capability_is_on_the_page():
    page = PAGE.read_text(encoding="utf-8")
    for protocol in contract_docs._protocols():
        assert protocol.__doc__, f"{protocol.__name__} says nothing about itself"
        members = [*protocol.__dict__.get("__annotations__", {}),
                   *(n for n, v in protocol.__dict__.items() if callable(v) and (n == "__call__" or not n.startswith("_")))]
        for member in members:
            assert f"- `{member}" in page, f"{protocol.__name__}.{member} is not on docs/plugins.md"
    for rule, text in contracts.RULES.items():
        assert f"`{rule}`: {text}" in page
    for protocols in contracts.OPTIONAL.values():
        for protocol in protocols:
            assert protocol.__doc__, f"{protocol.__name__} says nothing about itself"
            assert f"`{contracts.optional_member(protocol)}` (`{protocol.__name__}`)" in page
    for capability in contracts.CAPABILITIES:
        assert f"`{capability}`" in page


def test_every_capability_a_built_in_declares_is_a_known_one():
    import re

    root = Path(contracts.__file__).resolve().parents[1] / "plugins"
    declared = set()
    for source in root.rglob("*.py"):
        if "build" in source.parts:
            continue
        text = source.read_text(encoding="utf-8")
        for group in re.findall(r"(?:capabilities|needs)\s*=\s*frozenset\(\{([^}]*)\}\)", text):
            declared |= set(re.findall(r'"([a-z0-9-]+)"', group))
    assert declared and declared <= set(contracts.CAPABILITIES), declared - set(contracts.CAPABILITIES)
