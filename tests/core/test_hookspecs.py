"""Meta-test: every hook spec is documented and exercised by some test (the datasette rule).

The hook reference page (docs/pages/reference/hooks.md) is generated from these specs by
docs/gen/pages.py; tests/docs checks that it renders every one of them.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from agentrl_plugins import hookspecs
from agentrl_plugins.components import KINDS

TESTS = Path(__file__).parents[1]
HOOK_REFERENCE = TESTS.parent / "docs" / "pages" / "reference" / "hooks.md"


def hook_names() -> list[str]:
    return [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("agentrl_")]


def test_every_hook_has_a_docstring():
    for name in hook_names():
        assert (getattr(hookspecs, name).__doc__ or "").strip(), f"hook {name} has no docstring"


def test_every_hook_docstring_states_what_each_argument_is():
    undocumented = [(name, argument) for name in hook_names()
                    for argument in inspect.signature(getattr(hookspecs, name)).parameters
                    if argument.lower() not in getattr(hookspecs, name).__doc__.lower()]
    assert not undocumented, f"hook arguments their docstring does not mention: {undocumented}"


def test_every_registration_hook_has_a_record_type_that_documents_what_to_register():
    hooks = {cls.hook for cls in KINDS.values()}
    registration = [name for name in hook_names() if name.startswith("agentrl_register_")]
    assert [name for name in registration if name not in hooks] == ["agentrl_register_commands"]
    assert all(hook in registration for hook in hooks)


def test_the_hook_reference_page_includes_the_generated_hook_sections():
    assert '--8<-- "generated/hooks.md"' in HOOK_REFERENCE.read_text()


def test_every_hook_is_implemented_by_a_test_plugin():
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py") if path != Path(__file__))
    missing = [name for name in hook_names() if f"def {name}(" not in sources]
    assert not missing, f"hooks no test implements: {missing}"
    assert len(hook_names()) == 13


def test_the_contract_version_is_in_the_changelog_and_the_hook_reference():
    import agentrl_plugins

    version = hookspecs.HOOK_CONTRACT_VERSION
    assert agentrl_plugins.HOOK_CONTRACT_VERSION == version
    assert f"(hook contract {version})" in (TESTS.parent / "CHANGELOG.md").read_text()
    assert f"`agentrl_plugins.HOOK_CONTRACT_VERSION` is `{version}`" in HOOK_REFERENCE.read_text()


def test_every_hook_argument_is_typed():
    untyped = [(name, argument) for name in hook_names()
               for argument, parameter in inspect.signature(getattr(hookspecs, name)).parameters.items()
               if parameter.annotation is inspect.Parameter.empty]
    assert untyped == []
