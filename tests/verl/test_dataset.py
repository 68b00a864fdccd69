"""``agentrl verl dataset``: parquet files that verl's own RLHFDataset reads, with the agent loop per row, holding
the tasks of the recipe's environment with its options."""

from __future__ import annotations

import pandas as pd
from omegaconf import OmegaConf
from typer.testing import CliRunner
from verl.utils.dataset.rl_dataset import RLHFDataset

from agentrl_plugins.cli import build_app
from agentrl_plugins.environment import build_environment
from agentrl_plugins.recipe import load_recipe

from bugfix_gym.families import FAMILIES


def test_the_command_writes_one_readable_parquet_file_per_split(tmp_path, tokenizer):
    result = CliRunner().invoke(build_app(), ["verl", "dataset", str(tmp_path)])
    assert result.exit_code == 0, result.output
    tasks = build_environment(load_recipe("deepswe_grpopp", {}, "laptop").environment).tasks()
    assert len(tasks) > len(FAMILIES), "the laptop profile's options (renamed variants) are honoured"
    splits = {task.split for task in tasks}
    issues = {task.id: task.issue for task in tasks}
    assert sorted(p.stem for p in tmp_path.glob("*.parquet")) == sorted(splits)
    for split in splits:
        frame = pd.read_parquet(tmp_path / f"{split}.parquet")
        expected = [task.id for task in tasks if task.split == split]
        assert [info["task_id"] for info in frame["extra_info"]] == expected
        assert set(frame["agent_name"]) == {"agentrl_bugfix"}
        assert [list(m["role"] for m in prompt) for prompt in frame["prompt"]] == [["system", "user"]] * len(expected)
        dataset = RLHFDataset(str(tmp_path / f"{split}.parquet"), tokenizer,
                              OmegaConf.create({"max_prompt_length": 1024, "filter_overlong_prompts": False}))
        row = dataset[0]
        assert row["agent_name"] == "agentrl_bugfix" and row["extra_info"]["task_id"] == expected[0]
        assert row["raw_prompt"][1]["content"] == issues[expected[0]]
        assert row["reward_model"]["ground_truth"] == expected[0]


def test_options_from_the_command_line_reach_the_dataset(tmp_path):
    result = CliRunner().invoke(build_app(), ["verl", "dataset", str(tmp_path),
                                              "-o", "environment.options={}"])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(tmp_path / "train.parquet")
    assert [info["task_id"] for info in frame["extra_info"]] == [f.name for f in FAMILIES if f.split == "train"]
