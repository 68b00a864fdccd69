"""The recipe schema: every key a recipe may set, its type and its default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from agentrl_plugins.algorithms.aggregation import LossAggregation
from agentrl_plugins.algorithms.lr_schedule import LrSchedule


@dataclass
class EnvironmentSection:
    """Which environment the run trains in; the schema names no component (the base recipe does)."""

    name: str = ""
    train_split: str = "train"
    eval_split: str = "held_out"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class VerifierSection:
    names: list[str] = field(default_factory=list)
    combine: Literal["min", "mean", "product"] = "min"


@dataclass
class AdvantageSection:
    estimator: str = "grpo"
    masked_in_baseline: bool = True
    gamma: float = 0.95
    step_weight: float = 1.0


@dataclass
class LossSection:
    policy: str = "ppo_clip"
    aggregation: LossAggregation = "token-mean"
    norm_constant: Optional[int] = None
    clip_low: float = 0.2
    clip_high: float = 0.2
    clip_c: Optional[float] = None
    kl_coef: float = 0.0
    entropy_coef: float = 0.0


@dataclass
class CorrectionSection:
    name: str = "none"
    cap: float = 2.0
    low: float = 0.5
    high: float = 5.0


@dataclass
class MismatchSection:
    """The gate on the sampler/learner mismatch (measured on every step in every framework): below
    ``min_pearson`` a step warns, or stops the run; ``off`` does neither."""

    gate: Literal["warn", "stop", "off"] = "warn"
    min_pearson: float = 0.99


@dataclass
class TurnRewardSection:
    name: str = "none"
    signal: str = ""


@dataclass
class DistillationSection:
    """On-policy distillation: a teacher scores every token the student sampled, and each policy token's advantage
    gains ``-coef * (log p_sampler - log p_teacher)`` (the per-token reverse KL, k1, as the Tinker cookbook's
    on-policy distillation adds it). ``teacher`` is a registered model or a local Hugging Face folder ("" is off);
    ``task_reward`` keeps the estimator's advantages from the task reward beside it (false: distillation alone)."""

    teacher: str = ""
    divergence: Literal["reverse_kl"] = "reverse_kl"
    coef: float = 1.0
    task_reward: bool = True

    @property
    def enabled(self) -> bool:
        return bool(self.teacher)


@dataclass
class FilteringSection:
    compact: bool = False
    reasons: list[str] = field(default_factory=lambda: ["max_context", "max_turns", "timeout"])


@dataclass
class RolloutSection:
    group_size: int = 8
    tasks_per_step: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_turns: int = 6
    max_new_tokens_per_turn: int = 64
    max_context_tokens: int = 2048
    timeout_s: float = 600.0
    engine: Literal["vllm", "hf"] = "vllm"


@dataclass
class OptimSection:
    """AdamW and its learning-rate schedule, pinned so no framework falls back on a default of its own.

    Schedule and betas default to verl's (DeepSWE's script left them unset); weight decay to TRL's 0.
    """

    lr: float = 1e-6
    lr_schedule: LrSchedule = "constant"
    min_lr_ratio: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    updates_per_step: int = 1


@dataclass
class TrainSection:
    """The run: steps, seed, evaluation, and the model (a registered name or a local folder), optionally LoRA."""

    steps: int = 100
    seed: int = 0
    eval_every: int = 10
    eval_episodes_per_task: int = 4
    model: str = ""
    lora: bool = False
    lora_rank: int = 8
    lora_alpha: int = 16


@dataclass
class Choice:
    """A setting the published sources disagree on, made explicit."""

    key: str
    options: dict[str, str]
    why: str


SECTIONS: dict[str, type] = {
    "environment": EnvironmentSection,
    "verifier": VerifierSection,
    "advantage": AdvantageSection,
    "loss": LossSection,
    "correction": CorrectionSection,
    "mismatch": MismatchSection,
    "turn_reward": TurnRewardSection,
    "distillation": DistillationSection,
    "filtering": FilteringSection,
    "rollout": RolloutSection,
    "optim": OptimSection,
    "train": TrainSection,
}


@dataclass
class Recipe:
    """A validated recipe; ``sources`` cites where each published value comes from."""

    name: str
    description: str
    environment: EnvironmentSection = field(default_factory=EnvironmentSection)
    verifier: VerifierSection = field(default_factory=VerifierSection)
    advantage: AdvantageSection = field(default_factory=AdvantageSection)
    loss: LossSection = field(default_factory=LossSection)
    correction: CorrectionSection = field(default_factory=CorrectionSection)
    mismatch: MismatchSection = field(default_factory=MismatchSection)
    turn_reward: TurnRewardSection = field(default_factory=TurnRewardSection)
    distillation: DistillationSection = field(default_factory=DistillationSection)
    filtering: FilteringSection = field(default_factory=FilteringSection)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    optim: OptimSection = field(default_factory=OptimSection)
    train: TrainSection = field(default_factory=TrainSection)
    extends: Optional[str] = None
    sources: dict[str, str] = field(default_factory=dict)
    choices: list[Choice] = field(default_factory=list)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)


TOP_LEVEL_KEYS = ("name", "description", "extends", "sources", "choices", "profiles")
REQUIRED_COMPONENTS = {"environment.name": "an environment", "verifier.names": "at least one verifier",
                       "train.model": "a model (a registered name or a local Hugging Face folder)"}
"""Keys with no default in the schema: a runnable recipe sets them, or extends a recipe that does."""
