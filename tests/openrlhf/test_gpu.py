"""A real two-step OpenRLHF run of ``deepswe_grpopp`` (vLLM, flash-attn, DeepSpeed on CUDA), in one command.

Skipped without CUDA or without the real vLLM and flash-attn. Run it in an OpenRLHF GPU environment:
``python -m pytest tests/openrlhf/test_gpu.py -m gpu``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import SHIMMED

from agentrl_tinyagent.model import ModelSize, build_model

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(bool(SHIMMED), reason=f"needs the real {' and '.join(SHIMMED)}")]
VLLM_SIZE = ModelSize(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, intermediate_size=512)
"""TinyAgent widened to head dimension 64, which vLLM's attention kernels support."""


def test_two_real_openrlhf_steps(tmp_path, tokenizer):
    build_model(tokenizer, seed=0, size=VLLM_SIZE).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    overrides = ["train.steps=2", "train.eval_every=2", "train.eval_episodes_per_task=1", "rollout.group_size=4",
                 "rollout.tasks_per_step=2"]
    result = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "openrlhf",
         "--profile", "laptop", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "run"),
         *[arg for item in overrides for arg in ("-o", item)]],
        capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (tmp_path / "run" / "final" / "config.json").is_file()
