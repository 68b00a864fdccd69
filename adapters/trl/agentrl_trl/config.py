"""The recipe in TRL's terms: ``GRPOConfig`` keyword arguments and how faithfully each key maps.

Every loss aggregation is exact: TRL's ``loss_type`` gives the numerator, and a
per-batch row scale folded into the advantages fixes the denominator (TRL's
sequence-mean losses divide by all B rows; the core divides by the R rows that
still carry tokens after compact filtering).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentrl_plugins.adapter import (
    ComponentMapping,
    FrameworkConfig,
    advantage_parameter_rows,
    correction_parameter_rows,
    decided_settings,
    distillation_rows,
    turn_reward_rows,
)
from agentrl_plugins.algorithms.aggregation import TrainerDivisor
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.user_config import Decided, SettingChange, reconcile, same


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


REQUIREMENTS = (
    Decided("gradient_accumulation_steps", 1, "adapter: one micro-batch per step, so the row scale is the batch's"),
    Decided("steps_per_generation", 1, "adapter: each step trains on the episodes it just played"),
    Decided("scale_rewards", "none", "adapter: the recipe's estimator gives the advantages"),
    Decided("mask_truncated_completions", False, "adapter: compact filtering decides which episodes are masked"),
    Decided("vllm_importance_sampling_correction", False, "adapter: the recipe's correction replaces TRL's"),
)


def describe(recipe: Recipe) -> FrameworkConfig:
    """The GRPOConfig and one row per recipe key, both from :func:`mappings`."""
    rows = mappings(recipe)
    return FrameworkConfig("trl", {"GRPOConfig": grpo_config_kwargs(recipe, rows)}, rows)


def grpo_config_kwargs(recipe: Recipe, rows: list[ComponentMapping] | None = None) -> dict[str, Any]:
    """The ``GRPOConfig`` keyword arguments the recipe and the adapter decide (output and logging stay yours)."""
    return {setting.name: setting.value for setting in decided(recipe, rows) if setting.passed}


def decided(recipe: Recipe, rows: list[ComponentMapping] | None = None) -> list[Decided]:
    """Every GRPOConfig setting the recipe's rows and the adapter's requirements decide."""
    batch = recipe.rollout.group_size * recipe.rollout.tasks_per_step
    derived = [Decided("generation_batch_size", batch, "adapter: TRL derives it; one generation per step",
                       passed=False),
               Decided("logging_steps", recipe.optim.updates_per_step,
                       "adapter: one log per step (optim.updates_per_step of TRL's updates)")]
    return decided_settings(mappings(recipe) if rows is None else rows, [*REQUIREMENTS, *derived])


POLICY_LOSSES = {"ppo_clip": "token", "gspo": "sequence", "cispo": "token"}
"""Each policy loss TRL computes itself, by its ``importance_sampling_level``."""


def loss_mapping(recipe: Recipe) -> LossMapping:
    """TRL's ``loss_type`` and row scale for the recipe's policy loss and aggregation."""
    policy, aggregation = recipe.loss.policy, recipe.loss.aggregation
    if policy not in POLICY_LOSSES:
        raise RecipeError(f"{recipe.name}: TRL runs the policy losses {', '.join(POLICY_LOSSES)}; loss.policy = "
                          f"{policy!r} has no TRL mapping yet (it runs in OpenRLHF, whose loss the core replaces)")
    if policy == "cispo":
        if aggregation != "token-mean":
            raise RecipeError(f"{recipe.name}: TRL's cispo loss divides by the batch's loss tokens, so it runs "
                              f"with loss.aggregation = 'token-mean' only, not {aggregation!r}")
        return LossMapping("cispo", "1")
    return LOSS_TYPES[aggregation]


def policy_rows(recipe: Recipe) -> list[ComponentMapping]:
    """The rows of ``loss.policy`` and its clip range: the one setting where the three losses differ in TRL."""
    loss = recipe.loss
    level = POLICY_LOSSES.get(loss.policy, "token")
    sequence_note = ("exact without a correction; with one, TRL weights each token's sequence term by the "
                     "correction where the core weights each token's gradient" if loss.policy == "gspo" else "")
    rows = [ComponentMapping("loss.policy", loss.policy, f"importance_sampling_level={level!r}",
                             "approximated" if sequence_note and recipe.correction.name != "none" else "native",
                             sequence_note, native={"importance_sampling_level": level})]
    if loss.policy == "cispo":
        return rows + [
            ComponentMapping("loss.clip_low", loss.clip_low, "-", "native", "cispo has no lower bound"),
            ComponentMapping("loss.clip_high", loss.clip_high, f"epsilon_high={1 + loss.clip_high!r}", "mapped",
                             "TRL's cispo caps the weight at epsilon_high itself: 1 + clip_high",
                             native={"epsilon_high": 1 + loss.clip_high})]
    return rows + [
        ComponentMapping("loss.clip_low", loss.clip_low, "epsilon", "native", native={"epsilon": loss.clip_low}),
        ComponentMapping("loss.clip_high", loss.clip_high, "epsilon_high", "native",
                         native={"epsilon_high": loss.clip_high})]


def engine_mapping(recipe: Recipe) -> ComponentMapping:
    """``rollout.engine``: vLLM through TRL's own ``use_vllm`` (its engine, its weight sync; the episodes sample
    token ids through :class:`~agentrl_plugins.vllm_generator.VLLMGenerator`), or the core's HF sampler."""
    r = recipe.rollout
    if r.engine == "hf":
        return ComponentMapping("rollout.engine", r.engine, "use_vllm", "native", "the core's batched Hugging Face "
                                "sampler on the model being trained", native={"use_vllm": False})
    return ComponentMapping("rollout.engine", r.engine, "use_vllm", "native",
                            "TRL's vLLM engine (vllm_mode is yours; the episodes need 'colocate'); TRL's own IS "
                            "correction off (the recipe's correction applies); the engine's context is the recipe's",
                            native={"use_vllm": True, "vllm_max_model_length": r.max_context_tokens})


def dual_clip_row(recipe: Recipe) -> ComponentMapping:
    """``loss.clip_c`` as TRL's two-sided clip ``delta`` (INTELLECT-2), which caps the unclipped ratio at delta:
    for delta > 1 + clip_high that is the dual clip, value and gradient (where A > 0 the clip binds first; where
    A < 0 the loss is the clipped one held at -delta * A). Only ``ppo_clip`` takes ``clip_c``."""
    loss = recipe.loss
    delta = loss.clip_c if loss.policy == "ppo_clip" else None
    if delta is not None and delta <= 1 + loss.clip_high:
        raise RecipeError(f"{recipe.name}: TRL's dual clip is its two-sided clip delta, the same loss only above "
                          f"the clip range: loss.clip_c = {delta!r} must exceed 1 + loss.clip_high = "
                          f"{1 + loss.clip_high!r}")
    note = ("exact: delta caps the ratio where A < 0 at clip_c, above the clip range" if delta is not None
            else "no dual clip" if loss.clip_c is None else f"{loss.policy} takes no dual clip")
    return ComponentMapping("loss.clip_c", loss.clip_c, "delta", "native" if delta is None else "mapped", note,
                            native={"delta": delta})


def mappings(recipe: Recipe) -> list[ComponentMapping]:
    """One row per recipe key: how it reaches TRL, and the GRPOConfig settings it decides (``native``)."""
    loss = loss_mapping(recipe)
    r, loss_section, o = recipe.rollout, recipe.loss, recipe.optim
    batch = r.group_size * r.tasks_per_step
    max_completion = loss_section.norm_constant or r.max_context_tokens
    cosine = o.lr_schedule != "constant"
    return [
        ComponentMapping("advantage.estimator", recipe.advantage.estimator, "_generate_and_score_completions",
                         "injected", "the core estimator replaces TRL's advantages (scale_rewards='none' unused)"),
        ComponentMapping("advantage.masked_in_baseline", recipe.advantage.masked_in_baseline, "(core estimator)",
                         "injected"),
        *advantage_parameter_rows(recipe, "(core estimator)", "injected"),
        ComponentMapping("loss.aggregation", loss_section.aggregation, f"loss_type={loss.loss_type!r}",
                         "native" if loss.scale == "1" else "injected",
                         "" if loss.scale == "1" else f"exact: advantages scaled by {loss.scale} "
                                                      "(B rows, R rows with loss tokens)",
                         native={"loss_type": loss.loss_type}),
        ComponentMapping("loss.norm_constant", loss_section.norm_constant, f"max_completion_length={max_completion}",
                         "mapped" if loss_section.aggregation == "seq-mean-token-sum-norm" else "native",
                         "only the dr_grpo loss reads it; else the context budget",
                         native={"max_completion_length": max_completion}),
        *policy_rows(recipe),
        dual_clip_row(recipe),
        ComponentMapping("loss.kl_coef", loss_section.kl_coef, "beta", "native", native={"beta": loss_section.kl_coef}),
        ComponentMapping("loss.entropy_coef", loss_section.entropy_coef, "entropy_coef", "native",
                         native={"entropy_coef": loss_section.entropy_coef}),
        ComponentMapping("correction.name", recipe.correction.name, "advantages (B, T)", "injected",
                         "per-token weights from the sampler's log-probs folded into the advantages; "
                         "TRL's own IS correction (vLLM only) is switched off"),
        ComponentMapping("mismatch.gate", recipe.mismatch.gate, "AgentGRPOTrainer", "injected",
                         "the learner's log-probs before the update (the update's own forward where it is "
                         "on-policy) against the sampler's, per step"),
        ComponentMapping("mismatch.min_pearson", recipe.mismatch.min_pearson, "RunRecorder", "injected",
                         "checked on every recorded step"),
        ComponentMapping("filtering.compact", recipe.filtering.compact, "tool_mask rows zeroed", "injected",
                         f"reasons {recipe.filtering.reasons}; mask_truncated_completions=False"),
        ComponentMapping("filtering.reasons", recipe.filtering.reasons, "tool_mask rows zeroed", "injected",
                         "the terminations compact filtering masks"),
        *correction_parameter_rows(recipe, "advantages (B, T)", "injected"),
        ComponentMapping("rollout.group_size", r.group_size, "num_generations", "native",
                         native={"num_generations": r.group_size}),
        ComponentMapping("rollout.tasks_per_step", r.tasks_per_step, f"per_device_train_batch_size={batch}", "mapped",
                         "group_size x tasks_per_step episodes, one micro-batch",
                         native={"per_device_train_batch_size": batch}),
        ComponentMapping("rollout.temperature", r.temperature, "temperature", "native",
                         native={"temperature": r.temperature}),
        ComponentMapping("rollout.top_p", r.top_p, "top_p", "native", native={"top_p": r.top_p}),
        ComponentMapping("rollout.top_k", r.top_k, "top_k", "native", "TRL's 0 is the recipe's -1 (no top-k)",
                         native={"top_k": max(r.top_k, 0)}),
        ComponentMapping("rollout.max_turns", r.max_turns, "rollout_func", "injected", "core episode runner limits"),
        ComponentMapping("rollout.max_context_tokens", r.max_context_tokens, "rollout_func", "injected"),
        ComponentMapping("rollout.max_new_tokens_per_turn", r.max_new_tokens_per_turn, "rollout_func", "injected"),
        ComponentMapping("rollout.timeout_s", r.timeout_s, "rollout_func", "injected"),
        engine_mapping(recipe),
        ComponentMapping("optim.lr", o.lr, "learning_rate", "native", "no warm-up (warmup_steps=0, TRL's default)",
                         native={"learning_rate": o.lr}),
        ComponentMapping("optim.lr_schedule", o.lr_schedule,
                         f"lr_scheduler_type={'cosine_with_min_lr' if cosine else 'constant'!r}", "native",
                         "TRL's own default, linear decay to 0, is not used",
                         native={"lr_scheduler_type": "cosine_with_min_lr" if cosine else "constant"}),
        ComponentMapping("optim.min_lr_ratio", o.min_lr_ratio, "lr_scheduler_kwargs.min_lr_rate", "native",
                         "only the cosine schedule reads it",
                         native={"lr_scheduler_kwargs": {"min_lr_rate": o.min_lr_ratio}} if cosine else {}),
        ComponentMapping("optim.betas", o.betas, "adam_beta1, adam_beta2", "native",
                         native={"adam_beta1": o.betas[0], "adam_beta2": o.betas[1]}),
        ComponentMapping("optim.weight_decay", o.weight_decay, "weight_decay", "native",
                         native={"weight_decay": o.weight_decay}),
        ComponentMapping("optim.max_grad_norm", o.max_grad_norm, "max_grad_norm", "native",
                         native={"max_grad_norm": o.max_grad_norm}),
        ComponentMapping("optim.updates_per_step", o.updates_per_step, "num_iterations", "mapped",
                         "TRL counts each update as a step: a step of the run folder is updates_per_step of TRL's, "
                         "its figures their mean" if o.updates_per_step > 1 else "",
                         native={"num_iterations": o.updates_per_step}),
        ComponentMapping("verifier.names", recipe.verifier.names, "reward_funcs", "injected",
                         "the recipe's verifier scores each episode inside rollout_func"),
        ComponentMapping("verifier.combine", recipe.verifier.combine, "rollout_func", "injected",
                         "how several verifiers' rewards combine"),
        *turn_reward_rows(recipe, "rollout_func", "injected"),
        *distillation_rows(recipe, "_generate_and_score_completions", "injected"),
        ComponentMapping("environment.train_split", recipe.environment.train_split, "train_dataset", "injected",
                         "the task ids of this split"),
        ComponentMapping("environment.eval_split", recipe.environment.eval_split, "RunRecorder", "injected",
                         "held-out evaluation through rollout_func"),
        ComponentMapping("environment.name", recipe.environment.name, "rollout_func", "injected"),
        ComponentMapping("environment.options", recipe.environment.options, "rollout_func", "injected",
                         "keyword arguments of the environment's factory"),
        ComponentMapping("train.steps", recipe.train.steps, "max_steps", *(
            ("native", "") if o.updates_per_step == 1 else
            ("mapped", f"train.steps x optim.updates_per_step = {recipe.train.steps * o.updates_per_step} updates: "
                       f"{recipe.train.steps} batches, as in verl and OpenRLHF")),
                         native={"max_steps": recipe.train.steps * o.updates_per_step}),
        ComponentMapping("train.seed", recipe.train.seed, "seed", "native", native={"seed": recipe.train.seed}),
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


def grpo_config(recipe: Recipe, args: Any = None, **open_settings: Any) -> tuple[Any, list[SettingChange]]:
    """Your ``GRPOConfig`` with the recipe applied by the rule of :mod:`agentrl_plugins.user_config`, and the
    settings it changed. Without ``args``, TRL's defaults with ``open_settings`` (output, logging, precision).

    Raises :class:`~agentrl_plugins.user_config.ConfigConflictError` naming every setting you chose that the
    recipe decides otherwise.
    """
    from trl import GRPOConfig

    if args is None:
        args = GRPOConfig(**open_settings)
    elif open_settings:
        raise TypeError("pass your settings in your GRPOConfig, or pass no GRPOConfig; not both")
    config_type = type(args)
    base = {"output_dir": args.output_dir, "use_cpu": args.use_cpu}
    defaults = config_type(**base)
    settings = decided(recipe)
    names = {setting.name for setting in settings}
    changes = reconcile(settings, {n: getattr(args, n) for n in names}, {n: getattr(defaults, n) for n in names},
                        where=config_type.__name__, recipe=recipe.name, remedy=CONFLICT_REMEDY)
    kept = base | {f.name: getattr(args, f.name) for f in dataclasses.fields(args)
                   if f.init and f.name not in names and not same(getattr(args, f.name), getattr(defaults, f.name))}
    return config_type(**kept, **{s.name: s.value for s in settings if s.passed}), changes


CONFLICT_REMEDY = ("Leave these settings out of your GRPOConfig to take the recipe's values, or change the recipe "
                   "to yours (load_recipe(name, {'optim.lr': 1e-5}), or agentrl run -o optim.lr=1e-5). Settings "
                   "marked 'adapter' are what this adapter needs whatever the recipe.")
