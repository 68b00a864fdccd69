"""What ``agentrl run`` chooses for TRL among the settings the recipe leaves open."""

from __future__ import annotations

from pathlib import Path

import torch
from trl import GRPOConfig

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.runs.rundir import RunDir

from agentrl_trl.runner import runner_settings


def test_a_cpu_run_trains_without_gradient_checkpointing(tmp_path: Path):
    settings = runner_settings(RunDir(tmp_path), RunOptions(), updates_per_step=1)
    assert not torch.cuda.is_available()
    assert settings["use_cpu"] and settings["gradient_checkpointing"] is False
    assert GRPOConfig(**settings).gradient_checkpointing is False  # TRL 1.16's own default is True
