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
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_trl.build import FRAMEWORK, agent_trainer, hf_generator_factory, load_policy


def save_final_weights(trainer: Any, tokenizer: Any, run: RunDir) -> None:
    """The trained policy as a plain Hugging Face folder, ``final/``; a LoRA adapter is merged into its base
    weights first."""
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(policy, "merge_and_unload"):
        policy = policy.merge_and_unload()
    with run.exporting_final() as folder:
        policy.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))


def checkpoint_step(checkpoint: Path) -> int | None:
    """The step of ``checkpoint`` if transformers finished writing it (its trainer state, written last, reads
    back), else None."""
    try:
        return int(json.loads((checkpoint / TRAINER_STATE_NAME).read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def complete(checkpoint: Path) -> bool:
    return checkpoint_step(checkpoint) is not None


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
                            **runner_settings(run_dir, options, recipe.optim.updates_per_step))
    try:
        if checkpoint is not None and checkpoint_step(checkpoint) == recipe.train.steps * recipe.optim.updates_per_step:
            finish_trained(trainer, checkpoint, run_dir, recipe.train.steps)
        else:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except KeyboardInterrupt:
        print(f"\ninterrupted; completed steps are in {run_dir.path}. Continue with:\n"
              f"  agentrl run --resume {run_dir.path}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        trainer.episode_rollout.service.close()
    save_final_weights(trainer, tokenizer, run_dir)
    print(f"run folder: {run_dir.path}\nreport: {run_dir.report_file}", file=sys.stderr)
    return run_dir.path


def finish_trained(trainer: Any, checkpoint: Path, run: RunDir, last_step: int) -> None:
    """A resume of a run stopped after its last step: the last checkpoint's weights and the report, no training
    (transformers' ``train`` would run one step more)."""
    print(f"{checkpoint} is the last step's: training is done, so the resume writes the report and the final "
          "weights", file=sys.stderr)
    trainer._load_from_checkpoint(str(checkpoint))
    run.truncate_metrics(last_step)
    write_report(run)


def runner_settings(run_dir: RunDir, options: RunOptions, updates_per_step: int) -> dict[str, Any]:
    """The GRPOConfig settings ``agentrl run`` chooses among those the recipe leaves open: among them a
    checkpoint after every step (``updates_per_step`` of TRL's), so that a resume starts a step, not its
    second update, and on a CPU no gradient checkpointing (TRL's default recomputes every layer's forward in the
    backward pass to save activation memory a CPU run has plenty of: the step was 1.34x without it)."""
    cpu = not torch.cuda.is_available()
    return {"output_dir": str(run_dir.checkpoints), "use_cpu": cpu, "bf16": False, "gradient_checkpointing": not cpu,
            "save_strategy": "steps", "save_steps": updates_per_step, "save_total_limit": 1,
            "report_to": list(options.report_to) or "none", "disable_tqdm": False, "dataloader_num_workers": 0}
