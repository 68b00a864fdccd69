"""``agentrl compare A B --framework trl --learning`` through the real TRL trainer, on a tiny random model."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

from agentrl_plugins.cli import build_app
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import engine_overrides

TINY_BUDGET = ["train.steps=1", "rollout.tasks_per_step=1", "rollout.group_size=2", "rollout.max_turns=2",
               "rollout.max_new_tokens_per_turn=6", "rollout.max_context_tokens=512", "train.eval_every=1",
               "train.eval_episodes_per_task=1"]


def test_two_recipes_on_trl_train_per_seed_and_report_side_by_side(tmp_path, model, tokenizer, monkeypatch):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    monkeypatch.setenv("AGENTRL_PYTHON_TRL", sys.executable)
    out = tmp_path / "compare"
    arguments = ["compare", "deepswe_grpopp", "grpo", "--framework", "trl", "--learning", "--seeds", "0,1",
                 "--model", str(tmp_path / "model"), "--out", str(out)]
    arguments += [part for item in TINY_BUDGET + engine_overrides() for part in ("-o", item)]
    result = CliRunner().invoke(build_app(), arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for arm in ("trl-deepswe_grpopp", "trl-grpo"):
        for seed in (0, 1):
            run = RunDir(out / arm / f"seed{seed}")
            assert run.run_info()["seed"] == seed and run.load_recipe().train.steps == 1
            assert [row.step for row in run.read_metrics()] == [0, 1]
    assert RunDir(out / "trl-grpo" / "seed0").load_recipe().advantage.estimator == "grpo"
    assert RunDir(out / "trl-deepswe_grpopp" / "seed0").load_recipe().advantage.estimator == "rloo"
    text = (out / "learning.md").read_text()
    assert "# Learning: deepswe_grpopp (trl) vs grpo (trl)" in text and "| grpo (trl) | 0, 1 |" in text
    assert (out / "learning.png").is_file() and "learning report:" in result.output
    modified = (out / "trl-grpo" / "seed1" / "metrics.jsonl").stat().st_mtime
    again = CliRunner().invoke(build_app(), arguments, catch_exceptions=False)
    assert again.exit_code == 0 and "read back" in again.output
    assert (out / "trl-grpo" / "seed1" / "metrics.jsonl").stat().st_mtime == modified
