"""``agentrl run RECIPE --framework trl``: the real GRPOTrainer on the recipe's environment, with a run folder."""

from __future__ import annotations

import re
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch
from transformers import TrainerCallback

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.models import run_model
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.evaluate import Evaluation, summarize
from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_trl.config import grpo_config_kwargs
from agentrl_trl.rollout import EpisodeRollout, GeneratorFactory

if TYPE_CHECKING:
    from agentrl_trl.trainer import AgentGRPOTrainer

FRAMEWORK = "trl"


def load_policy(model_path: Path) -> tuple[Any, Any]:
    """A local Hugging Face causal LM with a chat template (what ``train.model`` resolved to)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.chat_template is None:
        raise AgentRLError(f"model {model_path}: the tokenizer has no chat template; the episode runner needs one")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa"), tokenizer


def save_final_weights(trainer: Any, tokenizer: Any, folder: Path) -> None:
    """The trained policy as a plain Hugging Face folder; a LoRA adapter is merged into its base weights first."""
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(policy, "merge_and_unload"):
        policy = policy.merge_and_unload()
    policy.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))


def latest_checkpoint(run: RunDir) -> Path:
    steps = [(int(m.group(1)), p) for p in run.checkpoints.glob("checkpoint-*")
             if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))]
    if not steps:
        raise AgentRLError(f"{run.path} has no checkpoint yet: start the run again instead of resuming it")
    return max(steps)[1]


class RunRecorder(TrainerCallback):
    """Writes a ``metrics.jsonl`` row per step (with held-out evaluation every ``eval_every`` steps)."""

    def __init__(self, run: RunDir, evaluate: Callable[[int], Evaluation], eval_every: int, hooks: Any):
        self.run, self.evaluate, self.eval_every, self.hooks = run, evaluate, eval_every, hooks
        self.trainer: Any = None
        self.started = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0 and not self.run.read_metrics():
            started = time.monotonic()
            evaluation = self.evaluate(0)
            self._record(StepMetrics(0, None, evaluation.pass_at_1, evaluation.hacked_fraction, None, None, None,
                                     None, None, 0, time.monotonic() - started))

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return
        step = state.global_step
        evaluation = self.evaluate(step) if step % self.eval_every == 0 or step == state.max_steps else None
        stats = self.trainer.step_stats
        self._record(StepMetrics(
            step=step,
            train_reward=stats["train_reward"],
            heldout_pass1=evaluation.pass_at_1 if evaluation else None,
            heldout_hacked_fraction=evaluation.hacked_fraction if evaluation else None,
            hacked_fraction=stats["hacked_fraction"],
            filtered_fraction=stats["filtered_fraction"],
            clip_fraction=logs.get("clip_ratio/region_mean", 0.0),
            is_capped_fraction=stats["is_capped_fraction"],
            entropy=logs.get("entropy"),
            policy_tokens=stats["policy_tokens"],
            seconds=time.monotonic() - self.started,
        ))

    def _record(self, row: StepMetrics) -> None:
        record_step(self.run, row, self.hooks)


def run(recipe: Recipe, options: RunOptions) -> Path:
    """Train, writing the run folder as it goes; returns the folder."""
    checkpoint = None
    if options.resume is not None:
        run_dir = RunDir(Path(options.resume))
        recipe = run_dir.load_recipe()
        checkpoint = latest_checkpoint(run_dir)
        run_dir.truncate_metrics(int(checkpoint.name.split("-")[1]))
        model_path = Path(run_dir.run_info().get("model_path") or run_model(recipe, None, prepare=True))
    else:
        model_path = run_model(recipe, options.model, prepare=True)
        run_dir = RunDir(Path(options.run_dir)) if options.run_dir else RunDir.default(recipe, FRAMEWORK)
        run_dir.create(recipe, FRAMEWORK, {"model": options.model or recipe.train.model, "model_path": str(model_path)})
    warnings.filterwarnings("ignore", message=r"`\w*gradient_checkpointing\w*` is deprecated", category=FutureWarning)
    model, tokenizer = load_policy(model_path)
    trainer = build_trainer(recipe, model, tokenizer, run_dir, _generator_factory(tokenizer))
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except KeyboardInterrupt:
        print(f"\ninterrupted; completed steps are in {run_dir.path}. Continue with:\n"
              f"  agentrl run --resume {run_dir.path}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        trainer.episode_rollout.service.close()
    save_final_weights(trainer, tokenizer, run_dir.final_weights)
    report = write_report(run_dir)
    print(f"run folder: {run_dir.path}\nreport: {report}", file=sys.stderr)
    return run_dir.path


def build_trainer(recipe: Recipe, model: Any, tokenizer: Any, run_dir: RunDir,
                  make_generator: GeneratorFactory) -> AgentGRPOTrainer:
    """The GRPOTrainer for ``recipe``: rollout through the core runner, metrics into ``run_dir``."""
    from datasets import Dataset
    from trl import GRPOConfig

    from agentrl_trl.trainer import AgentGRPOTrainer

    manager = get_plugin_manager()
    service = EpisodeService.from_recipe(recipe, manager)
    rollout = EpisodeRollout(service, tokenizer, make_generator, recipe.train.seed)
    held_out = service.split(recipe.environment.eval_split)

    def evaluate(step: int) -> Evaluation:
        policy = trainer.accelerator.unwrap_model(trainer.model)
        return summarize(rollout.play(policy, held_out, recipe.train.eval_episodes_per_task, step, "eval"))

    recorder = RunRecorder(run_dir, evaluate, recipe.train.eval_every, manager.hook)
    args = GRPOConfig(output_dir=str(run_dir.checkpoints), **grpo_config_kwargs(recipe),
                      use_cpu=not torch.cuda.is_available(), bf16=False, logging_steps=1, save_strategy="steps",
                      save_steps=1, save_total_limit=1, report_to="none", disable_tqdm=False,
                      dataloader_num_workers=0)
    trainer = AgentGRPOTrainer(
        model=model, args=args, processing_class=tokenizer, callbacks=[recorder],
        train_dataset=Dataset.from_dict({"prompt": [t.id for t in service.split(recipe.environment.train_split)]}),
        peft_config=_lora_config(recipe) if recipe.train.lora else None,
        algorithm=service.algorithm, rollout=rollout)
    recorder.trainer = trainer
    return trainer


def _generator_factory(tokenizer: Any):
    from agentrl_plugins.hf_sampler import HFGenerator

    def make(model: Any, seed: int) -> HFGenerator:
        return HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed)

    return make


def _lora_config(recipe: Recipe):
    from peft import LoraConfig

    return LoraConfig(r=recipe.train.lora_rank, lora_alpha=recipe.train.lora_alpha, lora_dropout=0.0,
                      target_modules="all-linear", task_type="CAUSAL_LM")
