"""A TRL outside agentrl-trl's declared range, installed for real: a clear error where the adapter is
imported, named by ``agentrl plugins`` and ``agentrl run``, and pip never changes a user's TRL for the adapter."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agentrl_plugins.framework_versions import supported_range
from agentrl_plugins.testing import fresh_environment

PYPROJECT = Path(__file__).parents[2] / "adapters" / "trl" / "pyproject.toml"
OLD_TRL = "1.9.2"  # before the range: its token-level luspo loss (seq-mean-token-sum here) is no token sum
EXCLUDED_TRL = "1.15.0"  # inside the bounds, left out: its GRPOTrainer needs Triton, so it cannot train on a CPU
TESTED_TRL = ("1.10.0", "1.16.0")  # the oldest and the newest: scripts/test runs tests/trl on both


def trl_environment(tmp_path_factory, version: str) -> Path:
    """A fresh environment over this one with TRL ``version`` installed in it (shadowing this environment's),
    and without the old setuptools of its own that would shadow this environment's."""
    python = fresh_environment(tmp_path_factory.mktemp(f"trl-{version}"))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", f"trl=={version}"], check=True)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True)
    return python


@pytest.fixture(scope="module")
def old_trl(tmp_path_factory) -> Path:
    return trl_environment(tmp_path_factory, OLD_TRL)


def test_the_range_is_the_adapters_trl_extra_from_the_oldest_to_the_newest_tested_release():
    specifier = supported_range("agentrl-trl", "trl").specifier
    assert all(specifier.contains(version) for version in TESTED_TRL)
    assert not specifier.contains(OLD_TRL) and not specifier.contains(EXCLUDED_TRL)


def test_this_environment_runs_a_tested_trl_release():
    """scripts/test runs these tests on the range's two ends; a new release in the range must be added here."""
    assert importlib.metadata.version("trl") in TESTED_TRL


def test_the_release_left_out_of_the_range_is_refused_where_the_adapter_is_imported(tmp_path_factory):
    python = trl_environment(tmp_path_factory, EXCLUDED_TRL)
    done = subprocess.run([str(python), "-c", "import agentrl_trl"], capture_output=True, text=True)
    assert done.returncode == 1 and f"this environment has trl {EXCLUDED_TRL}, which was left as it was" in done.stderr


def test_importing_the_adapter_under_an_old_trl_says_which_trl_it_supports(old_trl):
    done = subprocess.run([str(old_trl), "-c", "import agentrl_trl"], capture_output=True, text=True)
    assert done.returncode == 1
    (wanted,) = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["trl"]
    assert f"supports {wanted}; this environment has trl {OLD_TRL}, which was left as it was" in done.stderr
    assert f"pip install '{wanted}'" in done.stderr


def test_agentrl_names_the_broken_adapter_and_refuses_the_run_before_training(old_trl, tmp_path):
    listing = subprocess.run([str(old_trl), "-m", "agentrl_plugins", "plugins", "--json"],
                             capture_output=True, text=True, check=True)
    (trl,) = [row for row in json.loads(listing.stdout) if row["name"] == "trl"]
    assert trl["status"] == "broken" and f"trl {OLD_TRL}" in trl["description"]
    done = subprocess.run([str(old_trl), "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "trl",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "its adapter agentrl-trl" in done.stderr and f"this environment has trl {OLD_TRL}" in done.stderr
    assert not (tmp_path / "run").exists()


def test_pip_never_changes_the_users_trl_for_the_adapter():
    """TRL is required only through the adapter's [trl] extra, so installing the adapter into a TRL setup
    resolves nothing about TRL."""
    on_trl = [Requirement(line) for line in importlib.metadata.requires("agentrl-trl") or ()
              if Requirement(line).name == "trl"]
    assert on_trl and all(r.marker and not r.marker.evaluate({"extra": ""}) for r in on_trl)


def test_the_pages_message_is_the_error(old_trl):
    page = (Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "trl.md").read_text()
    (block,) = [b for b in re.findall(r"```text\n(.*?)```", page, re.S) if "which was left as it was" in b]
    done = subprocess.run([str(old_trl), "-c", "import agentrl_trl"], capture_output=True, text=True)
    message = done.stderr.strip().splitlines()[-1].split(": ", 1)[1]
    assert " ".join(block.replace("X.Y.Z", OLD_TRL).split()) == message
