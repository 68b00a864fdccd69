"""A real ``agentrl run`` stopped by a real signal at each moment its run folder is written, then resumed with
``agentrl run --resume``: the resumed run ends equal to one never stopped, nothing lost or duplicated.

Each stop is a process of its own (``killed_run.py``): SIGKILL while a checkpoint is written, while a metrics row
is appended, while a resume truncates the metrics, while the final weights are exported, and a Ctrl-C.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import torch
from transformers import Qwen2ForCausalLM

from agentrl_plugins.runs.journal import read_lines
from agentrl_plugins.runs.metrics import without_timing
from agentrl_plugins.runs.rundir import RunDir

from agentrl_tinyagent.model import build_model
from agentrl_trl.runner import complete, latest_checkpoint

RUNNER = Path(__file__).with_name("killed_run.py")
SETTINGS = ["--profile", "laptop", "--steps", "3", "-o", "rollout.group_size=4", "-o", "rollout.tasks_per_step=2",
            "-o", "train.eval_every=1", "-o", "train.eval_episodes_per_task=1", "-o", "optim.lr=1e-3"]


def agentrl_run(moment: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNNER), moment, *arguments], capture_output=True, text=True,
                          timeout=900, check=False)


def killed(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == -signal.SIGKILL


def steps(run: RunDir) -> list[int]:
    return [row.step for row in run.read_metrics()]


def rows_without_seconds(run: RunDir) -> list[dict]:
    return [without_timing(row).to_dict() for row in run.read_metrics()]


def test_a_run_killed_at_each_moment_resumes_to_the_run_never_stopped(tmp_path, tokenizer):
    model = tmp_path / "model"
    build_model(tokenizer, seed=0).save_pretrained(model)
    tokenizer.save_pretrained(model)
    start = ["deepswe_grpopp", "--model", str(model), *SETTINGS]
    whole, cut = RunDir(tmp_path / "whole"), RunDir(tmp_path / "cut")
    done = agentrl_run("none", *start, "--out", str(whole.path))
    assert done.returncode == 0, done.stderr[-3000:]
    resume = ["--resume", str(cut.path)]

    done = agentrl_run("checkpoint:2", *start, "--out", str(cut.path))
    assert killed(done), done.stderr[-3000:]
    assert steps(cut) == [0, 1, 2]  # step 2 was recorded before its checkpoint
    assert (cut.checkpoints / "checkpoint-2" / "model.safetensors").is_file()
    assert not complete(cut.checkpoints / "checkpoint-2") and latest_checkpoint(cut).name == "checkpoint-1"

    done = agentrl_run("interrupt:2", *resume)
    assert done.returncode == 130, done.stderr[-3000:]
    assert f"passing over {cut.checkpoints / 'checkpoint-2'}: incomplete" in done.stderr
    assert f"agentrl run --resume {cut.path}" in done.stderr
    assert steps(cut) == [0, 1, 2]  # the resume dropped step 2's row and ran the step again

    before = cut.metrics_file.read_text()
    done = agentrl_run("truncate", *resume)
    assert killed(done), done.stderr[-3000:]
    assert cut.metrics_file.read_text() == before  # the old file is whole, the new one was not renamed over it
    assert [row["step"] for row in read_lines(cut.metrics_file.with_name("metrics.jsonl.partial"))] == [0, 1]

    done = agentrl_run("metrics:3", *resume)
    assert killed(done), done.stderr[-3000:]
    assert not cut.metrics_file.read_text().endswith("\n") and steps(cut) == [0, 1, 2]  # row 3 is torn
    assert latest_checkpoint(cut).name == "checkpoint-2"
    assert not cut.metrics_file.with_name("metrics.jsonl.partial").exists()

    done = agentrl_run("export", *resume)
    assert killed(done), done.stderr[-3000:]
    assert steps(cut) == [0, 1, 2, 3] and latest_checkpoint(cut).name == "checkpoint-3"
    assert cut.final_staging.is_dir() and not cut.final_weights.exists()  # no half-written final/

    done = agentrl_run("none", *resume)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not cut.final_staging.exists() and cut.report_file.is_file()
    assert rows_without_seconds(cut) == rows_without_seconds(whole)
    expected = Qwen2ForCausalLM.from_pretrained(whole.final_weights).state_dict()
    resumed = Qwen2ForCausalLM.from_pretrained(cut.final_weights).state_dict()
    assert expected.keys() == resumed.keys()
    assert all(torch.equal(expected[name], resumed[name]) for name in expected)
    assert not torch.equal(expected["lm_head.weight"], build_model(tokenizer, seed=0).state_dict()["lm_head.weight"])
