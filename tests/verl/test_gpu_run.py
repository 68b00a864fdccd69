"""Two real verl training steps of ``deepswe_grpopp`` on the BugFix gym: GPU and vLLM only, skipped elsewhere.

Run on a GPU machine with vLLM installed in the verl environment:
``.venvs/verl/bin/python -m pytest tests/verl/test_gpu_run.py -m gpu``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agentrl_tinyagent.model import ModelSize, build_model

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
ROOT = Path(__file__).resolve().parents[2]
VLLM_SIZE = ModelSize(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, intermediate_size=512)
"""TinyAgent widened to head dimension 64, which vLLM's attention kernels support."""


def test_two_training_steps_of_deepswe_grpopp(tmp_path, tokenizer):
    pytest.importorskip("vllm")
    model_dir = tmp_path / "model"
    build_model(tokenizer, seed=0, size=VLLM_SIZE).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    run_dir = tmp_path / "run"
    overrides = ["train.steps=2", "train.eval_every=2", "train.eval_episodes_per_task=1", "rollout.group_size=4",
                 "rollout.tasks_per_step=2"]
    result = subprocess.run(
        [sys.executable, "-c", "from agentrl_plugins.cli import main; main()", "run", "deepswe_grpopp",
         "--framework", "verl", "--profile", "laptop", "--model", str(model_dir), "--out", str(run_dir),
         *[arg for item in overrides for arg in ("-o", item)]],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    rows = [json.loads(line) for line in (run_dir / "verl_metrics.jsonl").read_text().splitlines()]
    trained = [row for row in rows if "actor/pg_loss" in row["data"]]
    assert [row["step"] for row in trained] == [1, 2]
    assert all(0.0 <= row["data"]["critic/score/mean"] <= 1.0 for row in trained)
    assert (run_dir / "checkpoints" / "global_step_2").is_dir()
