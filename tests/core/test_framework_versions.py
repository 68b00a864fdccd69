"""An adapter's supported framework versions, read from its own extra: in range, out of range, missing."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.framework_versions import UnsupportedFrameworkError, check_framework, supported_range

PLUGGY = importlib.metadata.version("pluggy")


@pytest.fixture
def adapter(tmp_path, monkeypatch):
    """Installs a distribution 'agentrl-demo-adapter' whose extras name frameworks; returns a function that
    writes its requirement lines."""

    def declare(*requires: str) -> str:
        info = tmp_path / "agentrl_demo_adapter-0.3.0.dist-info"
        info.mkdir(exist_ok=True)
        lines = "".join(f"Requires-Dist: {line}\n" for line in requires)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: agentrl-demo-adapter\nVersion: 0.3.0\n{lines}")
        return "agentrl-demo-adapter"

    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return declare


def test_a_framework_in_the_declared_range_passes_and_the_extra_is_the_declaration(adapter):
    name = adapter("numpy>=1", f'pluggy>={PLUGGY}; extra == "pluggy"')
    assert str(supported_range(name, "pluggy").specifier) == f">={PLUGGY}"
    assert str(check_framework(name, "pluggy")) == PLUGGY


def test_a_framework_outside_the_range_names_the_range_the_version_and_what_to_run(adapter):
    name = adapter('pluggy<1.0; extra == "pluggy"')
    with pytest.raises(UnsupportedFrameworkError) as error:
        check_framework(name, "pluggy")
    message = str(error.value)
    assert f"agentrl-demo-adapter 0.3.0 supports pluggy<1.0; this environment has pluggy {PLUGGY}" in message
    assert "pip install 'pluggy<1.0'" in message and isinstance(error.value, ImportError)


def test_a_missing_framework_says_which_extra_installs_it(adapter):
    name = adapter('agentrl-no-such-framework==2.*; extra == "agentrl-no-such-framework"')
    with pytest.raises(UnsupportedFrameworkError, match=r"pip install 'agentrl-demo-adapter\[agentrl-no-such"):
        check_framework(name, "agentrl-no-such-framework")


def test_an_adapter_without_the_extra_is_an_error_of_the_adapter(adapter):
    name = adapter("pluggy>=1")
    with pytest.raises(AgentRLError, match=r"declares no \[pluggy\] extra"):
        check_framework(name, "pluggy")
