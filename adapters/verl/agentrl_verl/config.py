"""The recipe in verl's terms: Hydra overrides for ``python -m verl.trainer.main_ppo`` and how each key maps.

Native verl settings wherever verl computes the same numbers: loss aggregation,
clip ratios, KL and entropy, the four built-in corrections (verl's
``algorithm.rollout_correction``), and verl's own estimator when no row can lose
all its loss tokens or the recipe keeps filtered rows in the baseline. Otherwise
the registered ``agentrl_*`` estimator or policy loss runs the core's code. The
agent loop, the estimators, the injected policy loss and the reward read the whole recipe from
the run folder's ``recipe.toml`` (``+agentrl.recipe``, :mod:`agentrl_verl.recipe_file`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl_plugins.adapter import ComponentMapping, FrameworkConfig, correction_parameter_rows
from agentrl_plugins.models import run_model
from agentrl_plugins.recipe_schema import CorrectionSection, Recipe

from agentrl_verl.names import (
    RAW_RATIO_THRESHOLD,
    SEQUENCE_MEAN_MODES,
    agent_loop_name,
    estimator_name,
    policy_loss_name,
)
from agentrl_verl.recipe_file import RECIPE_KEY, UNLAUNCHED, recipe_overrides

ENTRYPOINT = ["python", "-m", "verl.trainer.main_ppo"]
NO_DUAL_CLIP = 1e9
"""verl always dual-clips; a clip_ratio_c above exp(20), its largest ratio, never binds."""
VERL_TWINS = {"grpo": ("grpo", True), "dr_grpo": ("grpo", False), "rloo": ("rloo", None)}
"""Core estimator -> verl estimator and ``norm_adv_by_std_in_grpo`` with the same numbers."""
THRESHOLDS = {
    "none": {},
    "token_tis": {"cap": "algorithm.rollout_correction.rollout_is_threshold"},
    "sequence_tis": {"cap": "algorithm.rollout_correction.rollout_is_threshold"},
    "icepop": {"low": "algorithm.rollout_correction.rollout_is_threshold",
               "high": "algorithm.rollout_correction.rollout_is_threshold"},
}
"""Which verl threshold carries each parameter of a correction verl computes; the others run in a policy loss."""


@dataclass(frozen=True)
class LaunchPaths:
    """Where the launched run finds its model and dataset, and writes its checkpoints."""

    model: str
    data_dir: Path
    run_dir: Path | None = None
    n_gpus: int = 1


def cache_root() -> Path:
    return Path(os.environ.get("AGENTRL_CACHE", "~/.cache/agentrl")).expanduser() / "verl"


def default_paths(recipe: Recipe) -> LaunchPaths:
    """The dataset under the cache, and the folder of the recipe's model (named, not built)."""
    model = run_model(recipe, None, prepare=False)
    return LaunchPaths(str(model), cache_root() / "data" / recipe.environment.name)


def correction_overrides(recipe: Recipe) -> tuple[dict[str, Any], str, str]:
    """verl's rollout-correction settings for the recipe's correction, its mapping status and a note."""
    c = recipe.correction
    prefix = "algorithm.rollout_correction."
    if c.name == "none":
        return {prefix + "rollout_is": None, prefix + "rollout_rs": None}, "native", "no correction"
    if c.name in ("token_tis", "sequence_tis"):
        level = c.name.split("_")[0]
        return ({prefix + "rollout_is": level, prefix + "rollout_is_threshold": c.cap, prefix + "rollout_rs": None},
                "mapped", f"verl {level}-level truncated IS, cap {c.cap}")
    if c.name == "icepop":
        return ({prefix + "rollout_is": "token", prefix + "rollout_is_threshold": f"{c.low}_{c.high}",
                 prefix + "rollout_rs": None}, "mapped", "verl token IS with a 'low_high' band (IcePop)")
    return ({prefix + "rollout_is": "token", prefix + "rollout_is_threshold": RAW_RATIO_THRESHOLD,
             prefix + "rollout_rs": None, "actor_rollout_ref.actor.policy_loss.loss_mode": policy_loss_name(c.name)},
            "injected", f"policy loss {policy_loss_name(c.name)} applies the core correction to verl's raw IS ratios")


def injects_loss(recipe: Recipe) -> bool:
    """Whether the recipe's correction runs in an ``agentrl_*`` policy loss (verl has no setting for it)."""
    return correction_overrides(recipe)[1] == "injected"


def recipe_file(paths: LaunchPaths) -> Path:
    """The run folder's ``recipe.toml`` that verl's processes read (a placeholder before a launch)."""
    return UNLAUNCHED if paths.run_dir is None else paths.run_dir / "recipe.toml"


def estimator_overrides(recipe: Recipe) -> tuple[dict[str, Any], str, str]:
    """verl's estimator for the recipe: its own twin where the numbers are the same, else ``agentrl_<name>``."""
    name = recipe.advantage.estimator
    exact = (name in VERL_TWINS and recipe.advantage.masked_in_baseline
             and not (recipe.filtering.compact and recipe.loss.aggregation in SEQUENCE_MEAN_MODES))
    if not exact:
        why = ("keeps the core's estimator, its baseline choice and its sequence-mean denominator (rows with "
               "loss tokens; verl's trainer divides by every row of the mini-batch)")
        return {"algorithm.adv_estimator": estimator_name(name)}, "injected", why
    twin, norm = VERL_TWINS[name]
    overrides: dict[str, Any] = {"algorithm.adv_estimator": twin}
    if norm is not None:
        overrides["algorithm.norm_adv_by_std_in_grpo"] = norm
    return overrides, "native", f"verl's {twin} gives the core's numbers here (parity test)"


def hydra_overrides(recipe: Recipe, paths: LaunchPaths) -> dict[str, Any]:
    """Every override of the launched command, in order."""
    r, loss, o, t = recipe.rollout, recipe.loss, recipe.optim, recipe.train
    actor, rollout = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
    overrides: dict[str, Any] = {
        "data.train_files": str(paths.data_dir / f"{recipe.environment.train_split}.parquet"),
        "data.val_files": str(paths.data_dir / f"{recipe.environment.eval_split}.parquet"),
        "data.train_batch_size": r.tasks_per_step,
        "data.max_prompt_length": r.max_context_tokens,
        "data.max_response_length": r.max_context_tokens,
        "data.seed": t.seed,
        "actor_rollout_ref.model.path": paths.model,
        **estimator_overrides(recipe)[0],
        "algorithm.use_kl_in_reward": False,
        **correction_overrides(recipe)[0],
        actor + "loss_agg_mode": loss.aggregation,
        actor + "clip_ratio_low": loss.clip_low,
        actor + "clip_ratio_high": loss.clip_high,
        actor + "clip_ratio_c": NO_DUAL_CLIP if loss.clip_c is None else loss.clip_c,
        actor + "use_kl_loss": loss.kl_coef > 0,
        actor + "kl_loss_coef": loss.kl_coef,
        actor + "entropy_coeff": loss.entropy_coef,
        actor + "optim.lr": o.lr,
        actor + "optim.lr_scheduler_type": o.lr_schedule,
        actor + "optim.min_lr_ratio": o.min_lr_ratio,
        actor + "optim.betas": o.betas,
        actor + "optim.weight_decay": o.weight_decay,
        actor + "optim.clip_grad": o.max_grad_norm,
        actor + "ppo_mini_batch_size": r.tasks_per_step,
        actor + "ppo_epochs": o.updates_per_step,
        actor + "use_dynamic_bsz": True,
        actor + "ppo_max_token_len_per_gpu": r.max_context_tokens,
        actor + "data_loader_seed": t.seed,
        rollout + "name": "vllm",
        rollout + "mode": "async",
        rollout + "n": r.group_size,
        rollout + "temperature": r.temperature,
        rollout + "top_p": r.top_p,
        rollout + "top_k": r.top_k,
        rollout + "calculate_log_probs": recipe.correction.name != "none",
        rollout + "max_model_len": r.max_context_tokens,
        rollout + "log_prob_use_dynamic_bsz": True,
        rollout + "log_prob_max_token_len_per_gpu": r.max_context_tokens,
        rollout + "agent.default_agent_loop": agent_loop_name(recipe.environment.name),
        rollout + "val_kwargs.n": t.eval_episodes_per_task,
        rollout + "val_kwargs.do_sample": True,
        rollout + "val_kwargs.temperature": r.temperature,
        rollout + "val_kwargs.top_p": r.top_p,
        rollout + "val_kwargs.top_k": r.top_k,
        "reward.custom_reward_function.path": "pkg://agentrl_verl.reward",
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.recipe": str(recipe_file(paths)),
        "trainer.total_training_steps": t.steps,
        "trainer.test_freq": t.eval_every,
        "trainer.save_freq": t.eval_every,
        "trainer.val_before_train": True,
        "trainer.logger": ["console", "file"],
        "trainer.project_name": "agentrl",
        "trainer.experiment_name": f"{recipe.name}-seed{t.seed}",
        "trainer.nnodes": 1,
        "trainer.n_gpus_per_node": paths.n_gpus,
        **recipe_overrides(recipe_file(paths), injects_loss(recipe)),
    }
    if loss.aggregation == "seq-mean-token-sum-norm":
        overrides[actor + "loss_scale_factor"] = loss.norm_constant
    if t.lora:
        overrides.update({"actor_rollout_ref.model.lora_rank": t.lora_rank,
                          "actor_rollout_ref.model.lora_alpha": t.lora_alpha,
                          "actor_rollout_ref.model.target_modules": "all-linear"})
    if paths.run_dir is not None:
        overrides["trainer.default_local_dir"] = str(paths.run_dir / "checkpoints")
    return overrides


def hydra_value(value: Any) -> str:
    """``value`` in Hydra's override grammar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{hydra_value(str(key))}:{hydra_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (int, float)):
        return repr(value)
    if re.fullmatch(r"[A-Za-z_/~][\w\-./:~]*", value) and value.lower() not in ("true", "false", "null"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def command(overrides: dict[str, Any]) -> list[str]:
    return ENTRYPOINT + [f"{key}={hydra_value(value)}" for key, value in overrides.items()]


def mappings(recipe: Recipe) -> list[ComponentMapping]:
    """One row per recipe key: the verl setting it becomes and how faithfully."""
    r, loss, o, t, c = recipe.rollout, recipe.loss, recipe.optim, recipe.train, recipe.correction
    actor, rollout, agentrl = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", f"+{RECIPE_KEY}"
    _, estimator_status, estimator_note = estimator_overrides(recipe)
    _, correction_status, correction_note = correction_overrides(recipe)
    runner = f"agent loop {agent_loop_name(recipe.environment.name)}"
    norm_used = loss.aggregation == "seq-mean-token-sum-norm"
    return [
        ComponentMapping("environment.name", recipe.environment.name, f"{runner} (dataset column agent_name)",
                         "injected", "the core episode runner drives the environment through server_manager.generate"),
        ComponentMapping("environment.train_split", recipe.environment.train_split, "data.train_files", "mapped",
                         "agentrl verl dataset writes one parquet file per split"),
        ComponentMapping("environment.eval_split", recipe.environment.eval_split, "data.val_files", "mapped"),
        ComponentMapping("environment.options", recipe.environment.options, f"{runner} and the dataset", "injected",
                         "keyword arguments of the environment's factory, in the agent loop and the dataset writer"),
        ComponentMapping("verifier.names", recipe.verifier.names, f"{runner}: reward_score", "injected",
                         "the recipe's verifier scores each episode; pkg://agentrl_verl.reward for verl's reward loop"),
        ComponentMapping("verifier.combine", recipe.verifier.combine, agentrl, "injected",
                         "how several verifiers' rewards combine"),
        ComponentMapping("advantage.estimator", recipe.advantage.estimator, "algorithm.adv_estimator",
                         estimator_status, estimator_note),
        baseline_mapping(recipe, estimator_status),
        ComponentMapping("loss.aggregation", loss.aggregation, actor + "loss_agg_mode", "native"),
        ComponentMapping("loss.norm_constant", loss.norm_constant, actor + "loss_scale_factor" if norm_used else "-",
                         "native", "" if norm_used else "only seq-mean-token-sum-norm reads it"),
        ComponentMapping("loss.clip_low", loss.clip_low, actor + "clip_ratio_low", "native"),
        ComponentMapping("loss.clip_high", loss.clip_high, actor + "clip_ratio_high", "native"),
        ComponentMapping("loss.clip_c", loss.clip_c, actor + "clip_ratio_c",
                         "native" if loss.clip_c is not None else "mapped",
                         "" if loss.clip_c is not None
                         else f"{NO_DUAL_CLIP:g}: verl's always-on dual clip never binds"),
        ComponentMapping("loss.kl_coef", loss.kl_coef, actor + "use_kl_loss, kl_loss_coef", "native",
                         "no reference model at 0"),
        ComponentMapping("loss.entropy_coef", loss.entropy_coef, actor + "entropy_coeff", "native"),
        ComponentMapping("correction.name", c.name, "algorithm.rollout_correction", correction_status,
                         correction_note),
        *(correction_parameter_rows(recipe, f"+{RECIPE_KEY} (policy loss)", "injected") if injects_loss(recipe)
          else [threshold_mapping(c, key) for key in ("cap", "low", "high")]),
        ComponentMapping("filtering.compact", recipe.filtering.compact, f"{runner}: response_mask zeroed",
                         "injected", "what DeepSWE's rLLM engine does; the reward is kept"),
        ComponentMapping("filtering.reasons", recipe.filtering.reasons, agentrl, "injected",
                         "the terminations compact filtering masks"),
        ComponentMapping("rollout.group_size", r.group_size, rollout + "n", "native"),
        ComponentMapping("rollout.tasks_per_step", r.tasks_per_step, "data.train_batch_size", "native",
                         "and actor.ppo_mini_batch_size: one mini-batch per step"),
        ComponentMapping("rollout.temperature", r.temperature, rollout + "temperature", "native"),
        ComponentMapping("rollout.top_p", r.top_p, rollout + "top_p", "native"),
        ComponentMapping("rollout.top_k", r.top_k, rollout + "top_k", "native"),
        ComponentMapping("rollout.max_turns", r.max_turns, agentrl, "injected", "the core runner's limits"),
        ComponentMapping("rollout.max_new_tokens_per_turn", r.max_new_tokens_per_turn, agentrl, "injected",
                         "max_tokens of each generate call"),
        ComponentMapping("rollout.max_context_tokens", r.max_context_tokens, agentrl, "injected",
                         "prompt + response; data.max_prompt_length, data.max_response_length and "
                         "rollout.max_model_len are sized to hold it"),
        ComponentMapping("rollout.timeout_s", r.timeout_s, agentrl, "injected"),
        ComponentMapping("optim.lr", o.lr, actor + "optim.lr", "native", "no warm-up (verl's default)"),
        ComponentMapping("optim.lr_schedule", o.lr_schedule, actor + "optim.lr_scheduler_type", "native",
                         "stepped once per training step"),
        ComponentMapping("optim.min_lr_ratio", o.min_lr_ratio, actor + "optim.min_lr_ratio", "native",
                         "only the cosine schedule reads it"),
        ComponentMapping("optim.betas", o.betas, actor + "optim.betas", "native"),
        ComponentMapping("optim.weight_decay", o.weight_decay, actor + "optim.weight_decay", "native"),
        ComponentMapping("optim.max_grad_norm", o.max_grad_norm, actor + "optim.clip_grad", "native"),
        ComponentMapping("optim.updates_per_step", o.updates_per_step, actor + "ppo_epochs", "mapped",
                         "passes over the step's single mini-batch"),
        ComponentMapping("train.steps", t.steps, "trainer.total_training_steps", "native"),
        ComponentMapping("train.seed", t.seed, "data.seed, actor.data_loader_seed", "mapped"),
        ComponentMapping("train.eval_every", t.eval_every, "trainer.test_freq", "native"),
        ComponentMapping("train.eval_episodes_per_task", t.eval_episodes_per_task, rollout + "val_kwargs.n",
                         "mapped", "sampled at the training temperature"),
        ComponentMapping("train.model", t.model, "actor_rollout_ref.model.path", "mapped",
                         "the folder of a registered model, or a local Hugging Face folder"),
        ComponentMapping("train.lora", t.lora, "actor_rollout_ref.model.lora_rank", "mapped",
                         "0 when off; all linear layers"),
        ComponentMapping("train.lora_rank", t.lora_rank, "actor_rollout_ref.model.lora_rank", "native"),
        ComponentMapping("train.lora_alpha", t.lora_alpha, "actor_rollout_ref.model.lora_alpha", "native"),
    ]


def baseline_mapping(recipe: Recipe, estimator_status: str) -> ComponentMapping:
    """``advantage.masked_in_baseline``: verl's estimators keep all-zero-mask rows; the agentrl one reads the key."""
    value, setting = recipe.advantage.masked_in_baseline, f"+{RECIPE_KEY}"
    if estimator_status == "native":
        return ComponentMapping("advantage.masked_in_baseline", value, setting, "native",
                                "verl's estimators keep all-zero-mask rows in the group statistics")
    return ComponentMapping("advantage.masked_in_baseline", value, setting, "injected", "read by the agentrl estimator")


def threshold_mapping(correction: CorrectionSection, key: str) -> ComponentMapping:
    """The row of ``correction.cap``, ``.low`` or ``.high`` of a correction verl computes: its threshold, if any."""
    uses = THRESHOLDS[correction.name]
    if key not in uses:
        return ComponentMapping(f"correction.{key}", getattr(correction, key), "-", "native",
                                "unused by this correction")
    return ComponentMapping(f"correction.{key}", getattr(correction, key), uses[key], "mapped")


def describe(recipe: Recipe, paths: LaunchPaths | None = None) -> FrameworkConfig:
    """The complete Hydra overrides, the mapping table and the ``main_ppo`` command."""
    overrides = hydra_overrides(recipe, paths or default_paths(recipe))
    return FrameworkConfig("verl", overrides, mappings(recipe), command(overrides))
