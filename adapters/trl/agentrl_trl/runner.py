"""``agentrl run RECIPE --framework trl``: the real GRPOTrainer on the recipe's environment, with a run folder."""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers.trainer import TRAINER_STATE_NAME

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.loggers import check_loggers
from agentrl_plugins.models import run_model
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_trl.build import FRAMEWORK, agent_trainer, hf_generator_factory, load_policy


def save_final_weights(trainer: Any, tokenizer: Any, folder: Path) -> None:
    """The trained policy as a plain Hugging Face folder; a LoRA adapter is merged into its base weights first."""
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(policy, "merge_and_unload"):
        policy = policy.merge_and_unload()
    policy.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))


def complete(checkpoint: Path) -> bool:
    """Whether transformers finished writing ``checkpoint``: its trainer state, written last, reads back."""
    try:
        json.loads((checkpoint / TRAINER_STATE_NAME).read_text())
    except (OSError, ValueError):
        return False
    return True


def latest_checkpoint(run: RunDir) -> Path:
    """The newest complete checkpoint; a newer one a kill left half-written is named and passed over."""
    steps = sorted(((int(m.group(1)), p) for p in run.checkpoints.glob("checkpoint-*")
                    if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))), reverse=True)
    for _, checkpoint in steps:
        if complete(checkpoint):
            return checkpoint
        print(f"passing over {checkpoint}: incomplete (the run stopped while writing it)", file=sys.stderr)
    raise AgentRLError(f"{run.path} has no complete checkpoint yet: start the run again instead of resuming it")


def run(recipe: Recipe, options: RunOptions) -> Path:
    """Train, writing the run folder as it goes; returns the folder."""
    check_loggers(options.report_to)
    checkpoint = None
    if options.resume is not None:
        run_dir = RunDir(Path(options.resume))
        recipe = run_dir.load_recipe()
        checkpoint = latest_checkpoint(run_dir)
        model_path = Path(run_dir.run_info().get("model_path") or run_model(recipe, None, prepare=True))
    else:
        model_path = run_model(recipe, options.model, prepare=True)
        run_dir = RunDir(Path(options.run_dir)) if options.run_dir else RunDir.default(recipe, FRAMEWORK)
        run_dir.create(recipe, FRAMEWORK, {"model": options.model or recipe.train.model, "model_path": str(model_path)})
    warnings.filterwarnings("ignore", message=r"`\w*gradient_checkpointing\w*` is deprecated", category=FutureWarning)
    model, tokenizer = load_policy(model_path)
    if "tensorboard" in options.report_to:  # transformers' TensorBoardCallback reads it; a user's own value wins
        os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(run_dir.path / "tensorboard"))
    if "wandb" in options.report_to:
        os.environ.setdefault("WANDB_DIR", str(run_dir.path))
    trainer = agent_trainer(recipe, model, tokenizer, run_dir=run_dir, generator=hf_generator_factory(tokenizer),
                            **runner_settings(run_dir, options))
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except KeyboardInterrupt:
        print(f"\ninterrupted; completed steps are in {run_dir.path}. Continue with:\n"
              f"  agentrl run --resume {run_dir.path}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        trainer.episode_rollout.service.close()
    save_final_weights(trainer, tokenizer, run_dir.final_weights)
    print(f"run folder: {run_dir.path}\nreport: {run_dir.report_file}", file=sys.stderr)
    return run_dir.path


def runner_settings(run_dir: RunDir, options: RunOptions) -> dict[str, Any]:
    """The GRPOConfig settings ``agentrl run`` chooses among those the recipe leaves open."""
    return {"output_dir": str(run_dir.checkpoints), "use_cpu": not torch.cuda.is_available(), "bf16": False,
            "save_strategy": "steps", "save_steps": 1, "save_total_limit": 1,
            "report_to": list(options.report_to) or "none", "disable_tqdm": False, "dataloader_num_workers": 0}
