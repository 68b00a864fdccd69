"""A finished verl run's actor as a plain Hugging Face folder, ``final/`` in the run folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.rundir import RunDir

CHECKPOINT_MARKER = "latest_checkpointed_iteration.txt"


def latest_checkpoint_step(checkpoints: Path) -> int:
    """The step of verl's latest checkpoint in ``checkpoints`` (what ``trainer.resume_mode=auto`` resumes from)."""
    marker = checkpoints / CHECKPOINT_MARKER
    if not marker.is_file():
        raise AgentRLError(f"{checkpoints} has no verl checkpoint yet: start the run again instead of resuming it")
    text = marker.read_text().strip()
    return int(text) if text.isdigit() else _repair_marker(checkpoints, text)


def _repair_marker(checkpoints: Path, text: str) -> int:
    """verl writes its marker last, truncating it before writing the step: a kill in between leaves it torn after
    the newest ``global_step_N`` folder was written completely, so that folder is the latest checkpoint."""
    steps = sorted(int(m.group(1)) for path in checkpoints.glob("global_step_*")
                   if (m := re.fullmatch(r"global_step_(\d+)", path.name)))
    if not steps:
        raise AgentRLError(f"{checkpoints / CHECKPOINT_MARKER} reads {text!r} and there is no checkpoint folder: "
                           "start the run again instead of resuming it")
    partial = checkpoints / (CHECKPOINT_MARKER + ".partial")
    partial.write_text(str(steps[-1]))
    os.replace(partial, checkpoints / CHECKPOINT_MARKER)
    print(f"{CHECKPOINT_MARKER} was torn (the run stopped while writing it); resuming from global_step_{steps[-1]}, "
          "the newest checkpoint folder", file=sys.stderr)
    return steps[-1]


def save_final_weights(run: RunDir, checkpoints: Path) -> Path:
    """The actor of verl's last checkpoint in ``checkpoints`` as ``final/`` in ``run``.

    FSDP2's shards (one per trainer rank, each parameter a DTensor sharded on one dimension or replicated) are
    joined here, in float32 as trained; any other layout goes through verl's own ``verl.model_merger``, which
    writes bfloat16 (said on stderr).
    """
    actor = checkpoints / f"global_step_{latest_checkpoint_step(checkpoints)}" / "actor"
    shards = sorted(actor.glob("model_world_size_*_rank_*.pt"), key=lambda path: int(path.stem.rsplit("_", 1)[1]))
    state = joined_shards(shards)
    with run.exporting_final() as folder:
        if state is None:
            merge = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                     str(actor), "--target_dir", str(folder)]
            done = subprocess.run(merge, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise AgentRLError(f"verl's model merger failed on {actor}:\n{done.stderr[-3000:]}")
            print(f"final weights: {actor}'s shards are not FSDP2 DTensors; verl's model merger wrote them in "
                  "bfloat16", file=sys.stderr)
        else:
            _save_state(actor, state, folder)
    return run.final_weights


def joined_shards(shards: list[Path]) -> dict[str, Any] | None:
    """The full state dict from FSDP2 checkpoint shards in rank order; None when a value is not a DTensor
    sharded on one dimension or replicated over a one-dimensional mesh."""
    import torch

    states = [torch.load(shard, map_location="cpu", weights_only=False) for shard in shards]
    joined = {}
    for key, value in states[0].items():
        placements = getattr(value, "placements", None)
        if placements is None or len(placements) != 1:
            return None
        (placement,) = placements
        if placement.is_shard():
            joined[key] = torch.cat([state[key].to_local() for state in states], dim=placement.dim)
        elif placement.is_replicate():
            joined[key] = value.to_local()
        else:
            return None
    return joined


def _save_state(actor: Path, state: dict[str, Any], folder: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(actor / "huggingface"), dtype=torch.float32)
    model.load_state_dict(state)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(actor / "huggingface").save_pretrained(folder)
