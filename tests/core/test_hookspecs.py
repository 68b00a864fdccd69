"""Meta-test: every hook spec is documented and exercised by some test (the datasette rule)."""

from __future__ import annotations

import inspect
from pathlib import Path

from agentrl_plugins import hookspecs

TESTS = Path(__file__).parents[1]


def hook_names() -> list[str]:
    return [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("agentrl_")]


def test_every_hook_has_a_docstring():
    for name in hook_names():
        assert (getattr(hookspecs, name).__doc__ or "").strip(), f"hook {name} has no docstring"


def test_every_hook_is_implemented_by_a_test_plugin():
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py") if path != Path(__file__))
    missing = [name for name in hook_names() if f"def {name}(" not in sources]
    assert not missing, f"hooks no test implements: {missing}"
    assert len(hook_names()) == 9
