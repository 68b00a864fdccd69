"""A framework adapter from outside this repository takes part everywhere the shipped three do.

The toy adapter (tests/fixtures/agentrl-toy-framework) is pip-installed into a fresh environment,
as a third party's would be. This environment does not have it: ``compare`` finds its environment
through ``AGENTRL_PYTHON_TOY`` and runs its parity side there, exactly as for verl and OpenRLHF.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl_plugins.testing import fresh_environment

TOY = Path(__file__).parents[1] / "fixtures" / "agentrl-toy-framework"


@pytest.fixture(scope="module")
def toy_python(tmp_path_factory) -> Path:
    return fresh_environment(tmp_path_factory.mktemp("toy-env"), TOY)


def agentrl(python: Path | str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "agentrl_plugins", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_the_toy_adapter_is_listed_with_its_distribution(toy_python):
    rows = json.loads(agentrl(toy_python, "plugins", "--json").stdout)
    (toy,) = [row for row in rows if row["kind"] == "adapter" and row["name"] == "toy"]
    assert toy["distribution"] == "agentrl-toy-framework" and toy["status"] == "ok"
    assert "toy" not in {row["name"] for row in json.loads(agentrl(sys.executable, "plugins", "--json").stdout)}


def test_recipes_show_maps_a_recipe_onto_the_toy_framework(toy_python):
    done = agentrl(toy_python, "recipes", "show", "grpo", "--framework", "toy", "--json")
    config = json.loads(done.stdout)
    assert config["framework"] == "toy" and config["command"][:2] == ["toyrl", "train"]
    assert {"key": "loss.clip_high", "value": 0.2, "setting": "--loss-clip_high", "status": "native",
            "note": "", "native": {}} in config["mappings"]


def test_compare_parity_runs_the_toy_side_in_its_own_environment(toy_python, tmp_path):
    done = agentrl(sys.executable, "compare", "grpo", "--frameworks", "toy", "--parity", "--out", str(tmp_path),
                   AGENTRL_PYTHON_TOY=str(toy_python))
    assert done.returncode == 0, done.stderr
    assert f"parity: toy in {toy_python}" in done.stderr
    report = (tmp_path / "report.md").read_text()
    assert "| toy | loss |" in report and "agentrl-toy-framework" in report
    result = json.loads((tmp_path / "parity_toy.json").read_text())
    assert result["framework"] == "toy"


def test_a_framework_known_only_here_by_its_python_but_without_the_adapter_says_so(tmp_path):
    done = agentrl(sys.executable, "compare", "grpo", "--frameworks", "toy", "--parity", "--out", str(tmp_path),
                   AGENTRL_PYTHON_TOY=sys.executable)
    assert done.returncode != 0
    assert "no adapter named 'toy' is registered in this environment" in " ".join(done.stderr.split())
