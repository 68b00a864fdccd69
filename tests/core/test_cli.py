"""The ``agentrl`` command as a user runs it: tables, JSON, and errors that say what to do."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from agentrl_plugins.cli import build_app

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(build_app(), list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def agentrl(*args):
    """Run the real entry point in a subprocess (errors go through ``main``)."""
    return subprocess.run([sys.executable, "-m", "agentrl_plugins", *args], capture_output=True, text=True)


def test_plugins_table_and_json():
    rows = json.loads(invoke("plugins", "--json"))
    assert {"kind", "name", "description", "distribution", "status"} <= set(rows[0])
    assert ("advantage", "rloo", "agentrl-plugins", "ok") in {
        (r["kind"], r["name"], r["distribution"], r["status"]) for r in rows}
    table = invoke("plugins")
    assert "distribution" in table and "rloo" in table and "[low, high]" in table


def test_recipes_list_and_show():
    names = {row["name"] for row in json.loads(invoke("recipes", "list", "--json"))}
    assert {"deepswe_grpopp", "grpo", "dr_grpo", "dapo", "rloo"} <= names
    shown = json.loads(invoke("recipes", "show", "deepswe_grpopp", "--json", "-o", "loss.clip_high=0.3"))
    assert shown["advantage"]["estimator"] == "rloo" and shown["loss"]["clip_high"] == 0.3
    text = invoke("recipes", "show", "deepswe_grpopp")
    assert "choice loss.aggregation" in text and "script: rollout.n=8" in text


@pytest.mark.parametrize("args, expected", [
    (["recipes", "show", "deepswe_grpopp", "--framework", "verl"], "pip install agentrl-verl"),
    (["recipes", "show", "deepswe"], "Did you mean 'deepswe_grpopp'"),
    (["recipes", "show", "grpo", "--framework", "verll"], "Did you mean 'verl'"),
    (["recipes", "show", "grpo", "-o", "loss.clip=0.3"], "Did you mean 'loss.clip_c'"),
    (["run", "deepswe_grpopp", "--advantage", "rlooo"], "unknown advantage 'rlooo'. Did you mean 'rloo'"),
    (["recipes", "show", "[/x]"], "unknown recipe '[/x]'"),  # printed as plain text, never as markup
    (["run", "grpo", "--dry-run", "-o", 'environment.name="bugfix"', "-o", "environment.options={renamed_variants=-1}"],
     "environment 'bugfix' refused its options {'renamed_variants': -1}: renamed_variants must be >= 0, got -1"),
])
def test_errors_are_specific_and_exit_2(args, expected):
    result = agentrl(*args)
    assert result.returncode == 2
    assert expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_an_error_with_brackets_reaches_the_terminal_as_written(tmp_path):
    recipe = tmp_path / "bad.toml"
    recipe.write_text('name = "bad"\nextends = "grpo"\nloss = 3\n')
    result = agentrl("recipes", "show", str(recipe))
    assert result.returncode == 2 and "bad: [loss] must be a table, got 3" in result.stderr


def test_run_without_the_adapter_names_the_distribution(monkeypatch):
    result = agentrl("run", "grpo", "--framework", "openrlhf", "--advantage", "rloo")
    assert result.returncode == 2
    assert "pip install agentrl-openrlhf" in " ".join(result.stderr.split())


def test_a_plugin_with_only_event_hooks_is_listed_with_its_hooks(fake_distribution):
    from agentrl_plugins.cli import plugin_rows
    from agentrl_plugins.plugins import PluginManager

    fake_distribution("fake-hooks", {"logger": """
        from agentrl_plugins import hookimpl

        @hookimpl
        def agentrl_step_end(step, metrics):
            pass

        @hookimpl
        def agentrl_episode_end(trajectory):
            pass
    """})
    rows = [row for row in plugin_rows(PluginManager()) if row["distribution"] == "fake-hooks"]
    assert rows == [{"kind": "hooks", "name": "logger", "description": "implements agentrl_episode_end, "
                     "agentrl_step_end", "distribution": "fake-hooks", "plugin": "logger", "status": "ok"}]
