"""An agentrl environment's tasks as verl's RL dataset: one parquet file per split, the agent loop chosen per row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from agentrl_plugins.environment import build_environment, close_environment
from agentrl_plugins.recipe_schema import EnvironmentSection

from agentrl_verl.names import agent_loop_name


def task_rows(settings: EnvironmentSection) -> list[dict[str, Any]]:
    """One verl row per task: chat ``prompt``, ``agent_name``, the task id as ground truth and in ``extra_info``."""
    environment = settings.name
    suite = build_environment(settings)
    try:
        return [{
            "data_source": f"agentrl/{environment}",
            "agent_name": agent_loop_name(environment),
            "prompt": [{"role": "system", "content": suite.system_prompt}, {"role": "user", "content": task.issue}],
            "ability": "agentic",
            "reward_model": {"style": "rule", "ground_truth": task.id},
            "extra_info": {"index": index, "split": task.split, "task_id": task.id, "environment": environment,
                           "environment_options": json.dumps(settings.options, sort_keys=True)},
        } for index, task in enumerate(suite.tasks())]
    finally:
        close_environment(suite)


def write_dataset(out_dir: Path, settings: EnvironmentSection) -> dict[str, Path]:
    """Write ``OUT_DIR/<split>.parquet`` for every split of the environment; returns the files by split."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = task_rows(settings)
    files = {}
    for split in dict.fromkeys(row["extra_info"]["split"] for row in rows):
        files[split] = out_dir / f"{split}.parquet"
        pd.DataFrame([row for row in rows if row["extra_info"]["split"] == split]).to_parquet(files[split],
                                                                                              index=False)
    return files
