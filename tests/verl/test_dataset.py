"""``agentrl verl dataset``: parquet files that verl's own RLHFDataset reads, with the agent loop per row."""

from __future__ import annotations

import pandas as pd
from omegaconf import OmegaConf
from typer.testing import CliRunner
from verl.utils.dataset.rl_dataset import RLHFDataset

from agentrl_plugins.cli import build_app

from bugfix_gym.families import FAMILIES

ISSUES = {family.name: family.issue for family in FAMILIES}


def test_the_command_writes_one_readable_parquet_file_per_split(tmp_path, tokenizer):
    result = CliRunner().invoke(build_app(), ["verl", "dataset", str(tmp_path)])
    assert result.exit_code == 0, result.output
    splits = {family.split for family in FAMILIES}
    assert sorted(p.stem for p in tmp_path.glob("*.parquet")) == sorted(splits)
    for split in splits:
        frame = pd.read_parquet(tmp_path / f"{split}.parquet")
        expected = [family.name for family in FAMILIES if family.split == split]
        assert [info["task_id"] for info in frame["extra_info"]] == expected
        assert set(frame["agent_name"]) == {"agentrl_bugfix"}
        assert [list(m["role"] for m in prompt) for prompt in frame["prompt"]] == [["system", "user"]] * len(expected)
        dataset = RLHFDataset(str(tmp_path / f"{split}.parquet"), tokenizer,
                              OmegaConf.create({"max_prompt_length": 1024, "filter_overlong_prompts": False}))
        row = dataset[0]
        assert row["agent_name"] == "agentrl_bugfix" and row["extra_info"]["task_id"] == expected[0]
        assert row["raw_prompt"][1]["content"].startswith(ISSUES[expected[0]])
        assert row["reward_model"]["ground_truth"] == expected[0]
