"""verl from your own command: the page's two commands as written (a run folder, then verl's own ``main_ppo``
with an override of yours), and its contradicting override refused before any worker starts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agentrl_plugins.runs.metrics import logged_figures
from agentrl_plugins.runs.rundir import RunDir

PAGE = Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "verl.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), re.S)


@pytest.fixture(scope="module")
def shell(tmp_path_factory, model, tokenizer):
    """Runs a page block in a folder holding "your model" (a fresh TinyAgent at models/my-model), with this
    environment's ``agentrl`` and ``python`` on the PATH."""
    cwd = tmp_path_factory.mktemp("own")
    model.save_pretrained(cwd / "models" / "my-model")
    tokenizer.save_pretrained(cwd / "models" / "my-model")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                                          f"{os.environ['PATH']}"}

    def run(block: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=900)

    run.cwd = cwd
    return run


@pytest.fixture(scope="module")
def trained(shell) -> RunDir:
    done = shell(blocks("bash")[1])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    return RunDir(shell.cwd / "runs" / "mine")


def test_the_pages_commands_train_and_fill_the_run_folder(trained):
    assert [row.step for row in trained.read_metrics()] == [0, 1]
    assert trained.report_file.is_file() and (trained.final_weights / "config.json").is_file()
    assert trained.run_info()["config_changes"] == [], "main_ppo.sh already agrees with the recipe"
    assert (trained.path / "data" / "train.parquet").is_file()


def test_your_own_override_of_an_open_setting_is_kept(trained):
    hydra_config = (trained.path / "hydra" / ".hydra" / "config.yaml").read_text()
    assert "experiment_name: mine" in hydra_config


def test_the_agentrl_figures_are_in_verls_tensorboard_log(trained):
    events = EventAccumulator(str(trained.path / "tensorboard"))
    events.Reload()
    for row in trained.read_metrics():
        for name, value in logged_figures(row).items():
            assert {e.step: e.value for e in events.Scalars(name)}[row.step] == pytest.approx(value, abs=1e-6)


def test_a_contradicting_override_stops_before_any_worker_with_the_pages_table(trained, shell):
    metrics = trained.metrics_file.read_text()
    done = shell(blocks("bash")[2])
    assert done.returncode != 0
    table = blocks("text")[0].splitlines()[1:]
    output = done.stdout + done.stderr
    for line in table:
        assert line in output, line
    assert "ConfigConflictError" in output
    assert trained.metrics_file.read_text() == metrics, "nothing of the finished run is touched"
    assert json.loads(trained.run_file.read_text())["config_changes"] == []
