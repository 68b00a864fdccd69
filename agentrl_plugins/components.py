"""Typed records that plugins hand to the ``register`` callback, one per kind.

Each record is ``(name, the object, a one-line description)``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, ClassVar


class Component:
    """Validation shared by every record; subclasses are frozen dataclasses."""

    kind: ClassVar[str]
    hook: ClassVar[str]
    name: str
    description: str

    @property
    def obj(self) -> Any:
        """The registered object (the record's second field)."""
        return getattr(self, fields(self)[1].name)  # type: ignore[arg-type]  # every record is a dataclass

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"{self.kind} name must be a Python identifier, got {self.name!r}")
        if self.obj is None:
            raise ValueError(f"{self.kind} {self.name!r}: {fields(self)[1].name} is missing")  # type: ignore[arg-type]
        if not isinstance(self.description, str) or not self.description.strip() or "\n" in self.description.strip():
            raise ValueError(f"{self.kind} {self.name!r} needs a one-line description")


@dataclass(frozen=True)
class Environment(Component):
    """``factory(**options)`` returns an :class:`~agentrl_plugins.environment.EnvironmentSuite`.

    ``turn_states``: its steps carry state keys (``StepResult.state``), which turn-level estimators need.
    """

    name: str
    factory: Callable[..., Any]
    description: str
    turn_states: bool = False
    kind: ClassVar[str] = "environment"
    hook: ClassVar[str] = "agentrl_register_environments"


@dataclass(frozen=True)
class Verifier(Component):
    """``factory(**options)`` returns a callable ``(outcome) -> Verdict``."""

    name: str
    factory: Callable[..., Callable[[Any], Any]]
    description: str
    kind: ClassVar[str] = "verifier"
    hook: ClassVar[str] = "agentrl_register_verifiers"


ADVANTAGE_LEVELS = ("trajectory", "turn", "token")


@dataclass(frozen=True)
class AdvantageEstimator(Component):
    """An advantage estimator and what it returns (``level``).

    - ``trajectory`` (the default): ``compute(rewards, group_ids, valid=None, *, masked_in_baseline)`` returns
      one advantage per trajectory, [B].
    - ``turn`` and ``token``: ``compute(credit, *, masked_in_baseline)`` with a
      :class:`~agentrl_plugins.algorithms.credit.CreditInputs` returns one advantage per turn (a list per
      trajectory, aligned with its turns) or per token, [B, T].

    ``needs_states``: it groups turns by their state keys, so the environment must emit them.
    """

    name: str
    compute: Callable[..., Any]
    description: str
    level: str = "trajectory"
    needs_states: bool = False
    kind: ClassVar[str] = "advantage"
    hook: ClassVar[str] = "agentrl_register_advantages"

    def __post_init__(self):
        super().__post_init__()
        if self.level not in ADVANTAGE_LEVELS:
            raise ValueError(f"advantage {self.name!r}: level must be one of {', '.join(ADVANTAGE_LEVELS)}, "
                             f"got {self.level!r}")


@dataclass(frozen=True)
class Correction(Component):
    """``compute(learner_logp, sampler_logp, mask, **params) -> CorrectionResult``."""

    name: str
    compute: Callable[..., Any]
    description: str
    kind: ClassVar[str] = "correction"
    hook: ClassVar[str] = "agentrl_register_corrections"


@dataclass(frozen=True)
class PolicyLoss(Component):
    """``compute(inputs, **params) -> PolicyLossResult``: per-token loss terms from a
    :class:`~agentrl_plugins.algorithms.policy_loss.PolicyLossInputs`; ``params`` are the recipe's ``loss.clip_low``,
    ``clip_high`` and ``clip_c``, each passed when the signature names it."""

    name: str
    compute: Callable[..., Any]
    description: str
    kind: ClassVar[str] = "policy_loss"
    hook: ClassVar[str] = "agentrl_register_policy_losses"


@dataclass(frozen=True)
class TurnReward(Component):
    """``compute(turns, initial_signals, **params) -> rewards``: one reward (or None) per turn of an episode, from
    its :class:`~agentrl_plugins.types.TurnOutcome` s and its start state's signals; ``params`` are the recipe's
    ``turn_reward.signal`` and ``advantage.gamma`` (as ``gamma``), each passed when the signature names it.
    The rewards add to the environment's own and reach turn-level estimators."""

    name: str
    compute: Callable[..., Any]
    description: str
    kind: ClassVar[str] = "turn_reward"
    hook: ClassVar[str] = "agentrl_register_turn_rewards"


@dataclass(frozen=True)
class RecipeFile(Component):
    """A recipe data file (TOML) on disk."""

    name: str
    path: Path
    description: str
    kind: ClassVar[str] = "recipe"
    hook: ClassVar[str] = "agentrl_register_recipes"


@dataclass(frozen=True)
class ExperimentFile(Component):
    """An experiment data file (TOML) on disk: recipes compared at one sample budget and the predictions checked
    (the format: :func:`agentrl_plugins.compare.experiments.read_experiment`)."""

    name: str
    path: Path
    description: str
    kind: ClassVar[str] = "experiment"
    hook: ClassVar[str] = "agentrl_register_experiments"


@dataclass(frozen=True)
class Adapter(Component):
    """``factory()`` returns a :class:`~agentrl_plugins.adapter.FrameworkAdapter`.

    ``parity()``, when given, returns the adapter's side of ``agentrl compare --parity``: a function
    ``compute(recipe, batch) -> ParityResult`` built on the framework's own code
    (:mod:`agentrl_plugins.compare.side`). Loaders, so that registering imports no framework.
    """

    name: str
    factory: Callable[[], Any]
    description: str
    parity: Callable[[], Callable[..., Any]] | None = None
    kind: ClassVar[str] = "adapter"
    hook: ClassVar[str] = "agentrl_register_adapters"


@dataclass(frozen=True)
class Model(Component):
    """``resolve(*, seed, prepare) -> Path``: the model's local Hugging Face folder.

    ``seed`` is the run's seed; with ``prepare`` false the resolver only names the folder (a dry run),
    with ``prepare`` true it makes sure the folder exists (builds or copies it) or raises
    :class:`~agentrl_plugins.errors.ModelUnavailableError` saying how to get it.
    """

    name: str
    resolve: Callable[..., Path]
    description: str
    kind: ClassVar[str] = "model"
    hook: ClassVar[str] = "agentrl_register_models"


KINDS: dict[str, type[Component]] = {
    cls.kind: cls for cls in (Environment, Verifier, AdvantageEstimator, Correction, PolicyLoss, TurnReward,
                                RecipeFile, ExperimentFile, Adapter, Model)
}
