"""Every hook a plugin can implement: registration hooks and monitor events.

Registration hooks receive a ``register`` callback; call it once per component
with the matching record from :mod:`agentrl_plugins.components`. The manager
notes which plugin and distribution each record came from, and takes a
plugin's records all or nothing: if any of its registration hooks raises, none
of its components is registered and the plugin is listed as broken.

The contract is versioned (:data:`HOOK_CONTRACT_VERSION`, semantic): a minor
version adds hooks, records or optional arguments; a major version removes or
changes one. A hook on its way out is marked with pluggy's ``warn_on_impl``, so
a plugin implementing it gets a :class:`DeprecationWarning` when it registers,
one minor version before the removal. ``CHANGELOG.md`` lists every change.
"""

from typing import Any, Callable

import pluggy
import typer

from agentrl_plugins.components import (
    Adapter,
    AdvantageEstimator,
    Correction,
    Environment,
    ExperimentFile,
    Model,
    PolicyLoss,
    RecipeFile,
    TurnReward,
    Verifier,
)
from agentrl_plugins.types import Trajectory

PROJECT = "agentrl"
HOOK_CONTRACT_VERSION = "1.4"
"""The version of the hook contract below (1.0: the first wave; 1.1 adds ``agentrl_register_models``; 1.2 adds
``agentrl_register_policy_losses`` and turn-level credit; 1.3 adds ``agentrl_register_turn_rewards``; 1.4 lets a
policy loss's figures be 0-dim tensors and tells it whether its weights are a correction's)."""
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def agentrl_register_environments(register: Callable[[Environment], None]) -> None:
    """Register environments.

    - ``register``: call ``register(Environment(name, factory, description))`` once per environment;
      ``factory(**options)`` returns an :class:`~agentrl_plugins.environment.EnvironmentSuite`.
    """


@hookspec
def agentrl_register_verifiers(register: Callable[[Verifier], None]) -> None:
    """Register verifiers.

    - ``register``: call ``register(Verifier(name, factory, description))`` once per verifier;
      ``factory()`` returns a callable ``(outcome) -> Verdict``.
    """


@hookspec
def agentrl_register_advantages(register: Callable[[AdvantageEstimator], None]) -> None:
    """Register advantage estimators.

    - ``register``: call ``register(AdvantageEstimator(name, compute, description))`` once per estimator;
      ``compute(rewards, group_ids, valid=None, *, masked_in_baseline) -> advantages``.
    """


@hookspec
def agentrl_register_corrections(register: Callable[[Correction], None]) -> None:
    """Register training/inference mismatch corrections.

    - ``register``: call ``register(Correction(name, compute, description))`` once per correction;
      ``compute(learner_logp, sampler_logp, mask, **params) -> CorrectionResult``.
    """


@hookspec
def agentrl_register_policy_losses(register: Callable[[PolicyLoss], None]) -> None:
    """Register policy losses a recipe's ``loss.policy`` can name (since contract 1.2).

    - ``register``: call ``register(PolicyLoss(name, compute, description))`` once per loss;
      ``compute(inputs, **params) -> PolicyLossResult`` gives per-token loss terms for a
      :class:`~agentrl_plugins.algorithms.policy_loss.PolicyLossInputs`, and ``params`` are the recipe's
      ``loss.clip_low``, ``clip_high`` and ``clip_c`` its signature names. Since 1.4 its figures may be 0-dim
      tensors (gathered once per step) and ``inputs.weighted`` says whether ``inputs.weights`` are a correction's.
    """


@hookspec
def agentrl_register_turn_rewards(register: Callable[[TurnReward], None]) -> None:
    """Register per-turn rewards a recipe's ``turn_reward.name`` can name (since contract 1.3).

    - ``register``: call ``register(TurnReward(name, compute, description))`` once per turn reward;
      ``compute(turns, initial_signals, **params)`` returns one reward (or None) per turn of an episode,
      added to the environment's own; ``params`` are the recipe's ``turn_reward.signal`` and
      ``advantage.gamma`` (as ``gamma``) its signature names.
    """


@hookspec
def agentrl_register_recipes(register: Callable[[RecipeFile], None]) -> None:
    """Register recipe files.

    - ``register``: call ``register(RecipeFile(name, path, description))`` once per TOML recipe.
    """


@hookspec
def agentrl_register_experiments(register: Callable[[ExperimentFile], None]) -> None:
    """Register experiment files (``agentrl experiment NAME``).

    - ``register``: call ``register(ExperimentFile(name, path, description))`` once per TOML experiment: its
      ``recipes``, the ``overrides`` every arm shares and its ``[[predictions]]`` (``claim``, ``figure``,
      ``higher``, ``lower``), read by ``agentrl_plugins.compare.experiments.read_experiment``.
    """


@hookspec
def agentrl_register_adapters(register: Callable[[Adapter], None]) -> None:
    """Register framework adapters.

    - ``register``: call ``register(Adapter(name, factory, description))`` once per framework;
      ``factory()`` returns a :class:`~agentrl_plugins.adapter.FrameworkAdapter`.
    """


@hookspec
def agentrl_register_models(register: Callable[[Model], None]) -> None:
    """Register models a recipe's ``train.model`` can name (since contract 1.1).

    - ``register``: call ``register(Model(name, resolve, description))`` once per model;
      ``resolve(*, seed, prepare) -> Path`` returns the model's local Hugging Face folder.
    """


@hookspec
def agentrl_episode_end(trajectory: Trajectory) -> None:
    """Called after each episode.

    - ``trajectory``: the finished :class:`~agentrl_plugins.types.Trajectory`, with its verdict.
    """


@hookspec
def agentrl_step_end(step: int, metrics: dict[str, Any]) -> None:
    """Called after each training step.

    - ``step``: the step number (1 is the first update; 0 is the evaluation before it).
    - ``metrics``: the step's row of ``metrics.jsonl`` (:class:`~agentrl_plugins.runs.metrics.StepMetrics`).
    """


@hookspec
def agentrl_register_commands(cli: typer.Typer) -> None:
    """Add subcommands to the ``agentrl`` command.

    - ``cli``: the ``agentrl`` :class:`typer.Typer` app; call ``cli.command(...)`` or ``cli.add_typer(...)``.
    """
