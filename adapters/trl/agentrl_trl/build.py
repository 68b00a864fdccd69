"""``agent_trainer``: TRL's GRPOTrainer for a recipe, on your model, tokenizer and GRPOConfig."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch

from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.evaluate import Evaluation, summarize
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import Decided, changes_table, reconcile

from agentrl_trl.config import grpo_config
from agentrl_trl.engine import check_engine_setup, engine_generator_factory, sync_engine, use_engine
from agentrl_trl.recorder import RunRecorder
from agentrl_trl.rollout import EpisodeRollout, GeneratorFactory
from agentrl_trl.trainer import AgentGRPOTrainer

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

FRAMEWORK = "trl"


def agent_trainer(recipe: Recipe | str, model: Any, tokenizer: Any = None, args: Any = None, *,
                  run_dir: str | Path | RunDir | None = None, generator: GeneratorFactory | None = None,
                  peft_config: Any = None, callbacks: Sequence[Any] = (), plugin_manager: PluginManager | None = None,
                  **open_settings: Any) -> AgentGRPOTrainer:
    """The GRPOTrainer that trains ``recipe``: its episodes, advantages, filtering, correction and loss.

    - ``recipe``: a :class:`~agentrl_plugins.recipe_schema.Recipe` (``load_recipe`` takes a profile and
      overrides) or a recipe name or ``.toml`` path.
    - ``model``: a Hugging Face causal LM, or the folder of one (then ``tokenizer`` may be left out: the
      folder's; a ``tokenizer`` you pass is kept).
    - ``args``: your ``GRPOConfig``. The settings the recipe decides are applied to those you left at TRL's
      defaults (a table of them is printed); one you set otherwise is a ``ConfigConflictError`` naming each.
      Without it, TRL's defaults with ``open_settings`` (for example ``output_dir``, ``report_to``).
    - ``run_dir``: the run folder (``metrics.jsonl``, ``report.md``); ``<output_dir>/agentrl`` by default.
    - ``generator``: ``(model, seed) -> generate`` for the episodes; by default TRL's vLLM engine where the recipe's
      ``rollout.engine`` is ``vllm`` (:mod:`agentrl_trl.engine`), the core's batched HF sampler where it is ``hf``.
    - ``peft_config``: your LoRA config; by default the recipe's (``train.lora``, ``lora_rank``, ``lora_alpha``).
    """
    from datasets import Dataset

    manager = plugin_manager or get_plugin_manager()
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe, plugin_manager=manager)
    if not hasattr(model, "config"):
        model, tokenizer = load_policy(Path(model), tokenizer)
    if tokenizer is None:
        raise AgentRLError("agent_trainer needs the tokenizer that goes with your model (tokenizer=...)")
    if args is None:
        run = _run_folder(run_dir, recipe)
        cpu = {} if torch.cuda.is_available() else {"use_cpu": True, "bf16": False}
        config, changes = grpo_config(recipe, None, **{"output_dir": str(run.checkpoints), **cpu, **open_settings})
    else:
        config, changes = grpo_config(recipe, args, **open_settings)
        print(changes_table(changes, type(args).__name__, recipe.name), file=sys.stderr)
        run = _run_folder(run_dir or Path(args.output_dir) / "agentrl", recipe)
    if config.use_vllm:
        check_engine_setup(config, model)
    if not isinstance(run_dir, RunDir):
        run.create(recipe, FRAMEWORK, {"config_changes": [[c.name, repr(c.default), repr(c.value), c.source]
                                                          for c in changes]})

    if config.use_vllm:
        generator = generator or engine_generator_factory(lambda: trainer, tokenizer.eos_token_id)
    service = EpisodeService.from_recipe(recipe, manager)
    rollout = EpisodeRollout(service, tokenizer, generator or hf_generator_factory(tokenizer), recipe.train.seed)
    held_out = service.split(recipe.environment.eval_split)

    def evaluate(step: int) -> Evaluation:
        if config.use_vllm:
            sync_engine(trainer)
        policy = trainer.accelerator.unwrap_model(trainer.model)
        return summarize(rollout.play(policy, held_out, recipe.train.eval_episodes_per_task, step, "eval"))

    recorder = RunRecorder(run, evaluate, recipe.train.eval_every, manager.hook, on_end=service.close)
    try:
        trainer = AgentGRPOTrainer(
            model=model, args=config, processing_class=tokenizer, callbacks=[recorder, *callbacks],
            train_dataset=Dataset.from_dict({"prompt": [t.id for t in service.split(recipe.environment.train_split)]}),
            peft_config=lora_config(recipe, peft_config),
            algorithm=service.algorithm, rollout=rollout)
    except BaseException:
        service.close()
        raise
    recorder.trainer = trainer
    if config.use_vllm:
        use_engine(trainer)
    return trainer


def load_policy(model_path: Path, tokenizer: Any = None) -> tuple[Any, Any]:
    """A local Hugging Face causal LM and its tokenizer (the folder's, unless you pass one), with a chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (model_path / "config.json").exists():
        raise AgentRLError(f"model {model_path}: not a Hugging Face model folder (no config.json)")
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
    if tokenizer.chat_template is None:
        raise AgentRLError(f"model {model_path}: the tokenizer has no chat template; the episode runner needs one")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa"), tokenizer


def hf_generator_factory(tokenizer: Any) -> GeneratorFactory:
    """Episodes sampled by the core's batched HF sampler from the model being trained."""
    from agentrl_plugins.hf_sampler import HFGenerator

    def make(model: Any, seed: int) -> HFGenerator:
        return HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed)

    return make


def lora_config(recipe: Recipe, yours: Any = None) -> Any:
    """The recipe's LoRA adapter on every linear layer (None when ``train.lora`` is off), or your ``LoraConfig``
    checked against the recipe by the same rule as the GRPOConfig."""
    from peft import LoraConfig

    if yours is None:
        if not recipe.train.lora:
            return None
        return LoraConfig(r=recipe.train.lora_rank, lora_alpha=recipe.train.lora_alpha, lora_dropout=0.0,
                          target_modules="all-linear", task_type="CAUSAL_LM")
    decided = [Decided("peft_config", recipe.train.lora, f"train.lora={recipe.train.lora!r}")]
    if recipe.train.lora:
        decided += [Decided("r", recipe.train.lora_rank, f"train.lora_rank={recipe.train.lora_rank}"),
                    Decided("lora_alpha", recipe.train.lora_alpha, f"train.lora_alpha={recipe.train.lora_alpha}")]
    defaults = LoraConfig()
    changes = reconcile(decided,
                        {"peft_config": True, "r": yours.r, "lora_alpha": yours.lora_alpha},
                        {"peft_config": False, "r": defaults.r, "lora_alpha": defaults.lora_alpha},
                        where=type(yours).__name__, recipe=recipe.name,
                        remedy="Set train.lora, train.lora_rank and train.lora_alpha in the recipe to yours "
                               "(load_recipe(name, {'train.lora': True, 'train.lora_rank': 16})), or pass no "
                               "peft_config to take the recipe's.")
    if changes:
        print(changes_table(changes, type(yours).__name__, recipe.name), file=sys.stderr)
        yours = dataclasses.replace(yours, **{c.name: c.value for c in changes})
    return yours


def _run_folder(run_dir: str | Path | RunDir | None, recipe: Recipe) -> RunDir:
    """The run folder: a RunDir as given (``agentrl run`` made it), a path, or ``runs/<recipe>-trl-...``."""
    if isinstance(run_dir, RunDir):
        return run_dir
    return RunDir(Path(run_dir)) if run_dir is not None else RunDir.default(recipe, FRAMEWORK)
