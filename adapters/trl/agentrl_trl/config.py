"""The recipe in TRL's terms: ``GRPOConfig`` keyword arguments and how faithfully each key maps.

Every loss aggregation is exact: TRL's ``loss_type`` gives the numerator, and a
per-batch row scale folded into the advantages fixes the denominator (TRL's
sequence-mean losses divide by all B rows; the core divides by the R rows that
still carry tokens after compact filtering).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl_plugins.adapter import ComponentMapping, FrameworkConfig, correction_parameter_rows
from agentrl_plugins.algorithms.aggregation import TrainerDivisor
from agentrl_plugins.recipe_schema import Recipe


@dataclass(frozen=True)
class LossMapping:
    """TRL ``loss_type`` for an aggregation mode and the row scale that makes it exact."""

    loss_type: str
    scale: TrainerDivisor


LOSS_TYPES = {
    "token-mean": LossMapping("dapo", "1"),
    "token-sum": LossMapping("luspo", "B"),
    "seq-mean-token-sum": LossMapping("luspo", "B/R"),
    "seq-mean-token-mean": LossMapping("grpo", "B/R"),
    "seq-mean-token-sum-norm": LossMapping("dr_grpo", "B/R"),
}


def lr_scheduler_settings(recipe: Recipe) -> dict[str, Any]:
    """Transformers' scheduler for the recipe's: ``constant``, or ``cosine_with_min_lr`` down to ``min_lr_ratio``."""
    if recipe.optim.lr_schedule == "constant":
        return {"lr_scheduler_type": "constant"}
    return {"lr_scheduler_type": "cosine_with_min_lr",
            "lr_scheduler_kwargs": {"min_lr_rate": recipe.optim.min_lr_ratio}}


def grpo_config_kwargs(recipe: Recipe) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for the recipe (output and logging settings come from the runner)."""
    loss = LOSS_TYPES[recipe.loss.aggregation]
    rollout = recipe.rollout
    batch = rollout.group_size * rollout.tasks_per_step
    return {
        "loss_type": loss.loss_type,
        "epsilon": recipe.loss.clip_low,
        "epsilon_high": recipe.loss.clip_high,
        "beta": recipe.loss.kl_coef,
        "entropy_coef": recipe.loss.entropy_coef,
        "num_generations": rollout.group_size,
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": 1,
        "num_iterations": recipe.optim.updates_per_step,
        "max_completion_length": recipe.loss.norm_constant or rollout.max_context_tokens,
        "temperature": rollout.temperature,
        "top_p": rollout.top_p,
        "top_k": max(rollout.top_k, 0),
        "learning_rate": recipe.optim.lr,
        **lr_scheduler_settings(recipe),
        "adam_beta1": recipe.optim.betas[0],
        "adam_beta2": recipe.optim.betas[1],
        "weight_decay": recipe.optim.weight_decay,
        "max_grad_norm": recipe.optim.max_grad_norm,
        "max_steps": recipe.train.steps,
        "seed": recipe.train.seed,
        "scale_rewards": "none",
        "mask_truncated_completions": False,
        "vllm_importance_sampling_correction": False,
    }


def describe(recipe: Recipe) -> FrameworkConfig:
    """The GRPOConfig plus one row per recipe component: native, mapped or injected."""
    kwargs = grpo_config_kwargs(recipe)
    loss = LOSS_TYPES[recipe.loss.aggregation]
    r, loss_section, o = recipe.rollout, recipe.loss, recipe.optim
    rows = [
        ComponentMapping("advantage.estimator", recipe.advantage.estimator, "_generate_and_score_completions",
                         "injected", "the core estimator replaces TRL's advantages (scale_rewards='none' unused)"),
        ComponentMapping("advantage.masked_in_baseline", recipe.advantage.masked_in_baseline, "(core estimator)",
                         "injected"),
        ComponentMapping("loss.aggregation", loss_section.aggregation, f"loss_type={loss.loss_type!r}",
                         "native" if loss.scale == "1" else "injected",
                         "" if loss.scale == "1" else f"exact: advantages scaled by {loss.scale} "
                                                      "(B rows, R rows with loss tokens)"),
        ComponentMapping("loss.norm_constant", loss_section.norm_constant,
                         f"max_completion_length={kwargs['max_completion_length']}",
                         "mapped" if loss_section.aggregation == "seq-mean-token-sum-norm" else "native",
                         "only the dr_grpo loss reads it"),
        ComponentMapping("loss.clip_low", loss_section.clip_low, "epsilon", "native"),
        ComponentMapping("loss.clip_high", loss_section.clip_high, "epsilon_high", "native"),
        ComponentMapping("loss.clip_c", loss_section.clip_c, "-",
                         "approximated" if loss_section.clip_c is not None else "native",
                         "TRL has no dual clip: it binds only where A < 0 and the ratio exceeds clip_c, which one "
                         "on-policy update per step never reaches"
                         if loss_section.clip_c is not None else "no dual clip"),
        ComponentMapping("loss.kl_coef", loss_section.kl_coef, "beta", "native"),
        ComponentMapping("loss.entropy_coef", loss_section.entropy_coef, "entropy_coef", "native"),
        ComponentMapping("correction.name", recipe.correction.name, "advantages (B, T)", "injected",
                         "per-token weights from the sampler's log-probs folded into the advantages; "
                         "TRL's own IS correction (vLLM only) is switched off"),
        ComponentMapping("filtering.compact", recipe.filtering.compact, "tool_mask rows zeroed", "injected",
                         f"reasons {recipe.filtering.reasons}; mask_truncated_completions=False"),
        ComponentMapping("filtering.reasons", recipe.filtering.reasons, "tool_mask rows zeroed", "injected",
                         "the terminations compact filtering masks"),
        *correction_parameter_rows(recipe, "advantages (B, T)", "injected"),
        ComponentMapping("rollout.group_size", r.group_size, "num_generations", "native"),
        ComponentMapping("rollout.tasks_per_step", r.tasks_per_step,
                         f"per_device_train_batch_size={kwargs['per_device_train_batch_size']}", "mapped",
                         "group_size x tasks_per_step episodes, one micro-batch"),
        ComponentMapping("rollout.temperature", r.temperature, "temperature", "native"),
        ComponentMapping("rollout.top_p", r.top_p, "top_p", "native"),
        ComponentMapping("rollout.top_k", r.top_k, "top_k", "native"),
        ComponentMapping("rollout.max_turns", r.max_turns, "rollout_func", "injected", "core episode runner limits"),
        ComponentMapping("rollout.max_context_tokens", r.max_context_tokens, "rollout_func", "injected"),
        ComponentMapping("rollout.max_new_tokens_per_turn", r.max_new_tokens_per_turn, "rollout_func", "injected"),
        ComponentMapping("rollout.timeout_s", r.timeout_s, "rollout_func", "injected"),
        ComponentMapping("optim.lr", o.lr, "learning_rate", "native", "no warm-up (warmup_steps=0, TRL's default)"),
        ComponentMapping("optim.lr_schedule", o.lr_schedule, f"lr_scheduler_type={kwargs['lr_scheduler_type']!r}",
                         "native", "TRL's own default, linear decay to 0, is not used"),
        ComponentMapping("optim.min_lr_ratio", o.min_lr_ratio, "lr_scheduler_kwargs.min_lr_rate", "native",
                         "only the cosine schedule reads it"),
        ComponentMapping("optim.betas", o.betas, "adam_beta1, adam_beta2", "native"),
        ComponentMapping("optim.weight_decay", o.weight_decay, "weight_decay", "native"),
        ComponentMapping("optim.max_grad_norm", o.max_grad_norm, "max_grad_norm", "native"),
        ComponentMapping("optim.updates_per_step", o.updates_per_step, "num_iterations", "mapped"),
        ComponentMapping("verifier.names", recipe.verifier.names, "reward_funcs", "injected",
                         "the recipe's verifier scores each episode inside rollout_func"),
        ComponentMapping("verifier.combine", recipe.verifier.combine, "rollout_func", "injected",
                         "how several verifiers' rewards combine"),
        ComponentMapping("environment.train_split", recipe.environment.train_split, "train_dataset", "injected",
                         "the task ids of this split"),
        ComponentMapping("environment.eval_split", recipe.environment.eval_split, "RunRecorder", "injected",
                         "held-out evaluation through rollout_func"),
        ComponentMapping("environment.name", recipe.environment.name, "rollout_func", "injected"),
        ComponentMapping("environment.options", recipe.environment.options, "rollout_func", "injected",
                         "keyword arguments of the environment's factory"),
        ComponentMapping("train.steps", recipe.train.steps, "max_steps", "native"),
        ComponentMapping("train.seed", recipe.train.seed, "seed", "native"),
        ComponentMapping("train.eval_every", recipe.train.eval_every, "RunRecorder", "injected",
                         "held-out evaluation every N steps and at the last"),
        ComponentMapping("train.eval_episodes_per_task", recipe.train.eval_episodes_per_task, "RunRecorder",
                         "injected", "sampled at the training temperature"),
        ComponentMapping("train.model", recipe.train.model, "GRPOTrainer(model=...)", "mapped",
                         "the folder of a registered model, or a local Hugging Face folder"),
        ComponentMapping("train.lora", recipe.train.lora, "GRPOTrainer(peft_config=LoraConfig(...))", "mapped",
                         "all linear layers, no dropout"),
        ComponentMapping("train.lora_rank", recipe.train.lora_rank, "LoraConfig.r", "native"),
        ComponentMapping("train.lora_alpha", recipe.train.lora_alpha, "LoraConfig.lora_alpha", "native"),
    ]
    return FrameworkConfig("trl", {"GRPOConfig": kwargs}, rows)
