"""A finished verl run's actor as a plain Hugging Face folder, ``final/`` in the run folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.rundir import RunDir

CHECKPOINT_MARKER = "latest_checkpointed_iteration.txt"


def latest_checkpoint_step(checkpoints: Path) -> int:
    """The step of verl's latest checkpoint in ``checkpoints`` (what ``trainer.resume_mode=auto`` resumes from)."""
    marker = checkpoints / CHECKPOINT_MARKER
    if not marker.is_file():
        raise AgentRLError(f"{checkpoints} has no verl checkpoint yet: start the run again instead of resuming it")
    return int(marker.read_text().strip())


def save_final_weights(run: RunDir, checkpoints: Path) -> Path:
    """The actor of verl's last checkpoint in ``checkpoints`` as ``final/`` in ``run``.

    One shard (one trainer process, as on a CPU) is written as it was trained, in float32; several
    shards go through verl's own ``verl.model_merger``, which writes bfloat16.
    """
    actor = checkpoints / f"global_step_{latest_checkpoint_step(checkpoints)}" / "actor"
    shards = sorted(actor.glob("model_world_size_*_rank_*.pt"))
    if len(shards) != 1:
        merge = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
                 "--target_dir", str(run.final_weights)]
        done = subprocess.run(merge, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise AgentRLError(f"verl's model merger failed on {actor}:\n{done.stderr[-3000:]}")
        return run.final_weights
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    state = torch.load(shards[0], map_location="cpu", weights_only=False)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(actor / "huggingface"), dtype=torch.float32)
    model.load_state_dict({key: getattr(value, "to_local", lambda v=value: v)() for key, value in state.items()})
    model.save_pretrained(run.final_weights)
    AutoTokenizer.from_pretrained(actor / "huggingface").save_pretrained(run.final_weights)
    return run.final_weights
