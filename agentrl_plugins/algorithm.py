"""The recipe's algorithm, resolved once from the registries: advantages with compact filtering, the correction
and the policy loss.

Adapters call this instead of re-implementing the math, so every framework
trains on the same numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

import torch
from torch import Tensor

from agentrl_plugins.algorithms.aggregation import aggregate_loss
from agentrl_plugins.algorithms.corrections import CorrectionResult
from agentrl_plugins.algorithms.credit import CreditInputs, TurnBatch, TurnRows, turn_values_to_tokens
from agentrl_plugins.algorithms.distillation import dense_advantages
from agentrl_plugins.algorithms.filtering import compact_filter
from agentrl_plugins.algorithms.policy_loss import PolicyLossInputs, PolicyLossResult
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.recipe_schema import AdvantageSection, DistillationSection, LossSection, Recipe

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

CORRECTION_PARAMETERS = ("cap", "low", "high")
"""The recipe's correction parameters; each correction takes the ones its signature names."""
ADVANTAGE_PARAMETERS = ("gamma", "step_weight")
"""The recipe's estimator parameters besides ``masked_in_baseline``; each estimator takes the ones it names."""
LOSS_PARAMETERS = ("clip_low", "clip_high", "clip_c")
"""The recipe's policy-loss parameters; each policy loss takes the ones its signature names."""


def named_params(function: Callable[..., Any], section: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The values of ``section``'s ``keys`` that ``function``'s signature names, by name: how a component takes
    the recipe parameters it wants."""
    try:
        accepted = _parameter_names(function)
    except TypeError:  # a callable that cannot be hashed: read its signature each time
        accepted = frozenset(inspect.signature(function).parameters)
    return {key: getattr(section, key) for key in keys if key in accepted}


@functools.lru_cache(maxsize=256)
def _parameter_names(function: Callable[..., Any]) -> frozenset[str]:
    """The names in ``function``'s signature, read once per component (a loss runs on every micro-batch)."""
    return frozenset(inspect.signature(function).parameters)


class UnusedSettingWarning(UserWarning):
    """A recipe sets a value its components do not use."""


def unused_loss_keys(recipe: Recipe, taken: Collection[str]) -> list[str]:
    """The policy-loss parameters (:data:`LOSS_PARAMETERS`) the recipe sets to other than their default and its
    loss does not take (``taken``), such as ``loss.clip_low`` under ``cispo``."""
    defaults = {field.name: field.default for field in dataclasses.fields(LossSection)}
    return [key for key in LOSS_PARAMETERS if key not in taken and getattr(recipe.loss, key) != defaults[key]]


@dataclass(frozen=True)
class Advantages:
    """The advantages (0 for filtered trajectories): one per trajectory, [B], or per token, [B, T], as the
    estimator's level says; and which trajectories stay in the loss."""

    values: Tensor
    valid: Tensor

    @property
    def filtered_fraction(self) -> float:
        return 1.0 - self.valid.float().mean().item() if self.valid.numel() else 0.0

    def per_token(self, width: int) -> Tensor:
        """The advantages as [B, width]: a trajectory's one value on every token, or the per-token values
        right-padded with 0 (or cut) to ``width``."""
        if self.values.dim() == 1:
            return self.values[:, None].expand(-1, width)
        padded = self.values.new_zeros(self.values.size(0), width)
        kept = min(width, self.values.size(1))
        padded[:, :kept] = self.values[:, :kept]
        return padded


def estimated_advantages(estimator: Callable[..., Any], level: str, name: str, section: AdvantageSection,
                         rewards: Tensor, group_ids: Tensor, valid: Tensor, batch: TurnBatch | None = None) -> Tensor:
    """What estimator ``name`` of ``level`` gives for the rows (``valid``: kept after filtering), with the
    parameters of ``section`` it names: [B] for a trajectory-level one; [B, T] for a turn- or token-level one,
    which also needs ``batch`` (the rows' turns and spans) and is 0 on filtered rows. Every adapter computes
    advantages here."""
    params = named_params(estimator, section, ADVANTAGE_PARAMETERS)
    if level == "trajectory":
        return estimator(rewards, group_ids, valid, masked_in_baseline=section.masked_in_baseline, **params)
    if batch is None or len(batch.turns) != len(rewards):
        raise AgentRLError(f"advantage estimator {name!r} is {level}-level: it needs the trajectories' turns, "
                           "which this framework's path does not pass")
    credit = CreditInputs(rewards, group_ids, valid, batch.turns, batch.turn_spans, batch.response_mask.size(1))
    values = estimator(credit, masked_in_baseline=section.masked_in_baseline, **params)
    values = turn_values_to_tokens(values, credit) if level == "turn" else values
    return _checked_tokens(name, values, credit) * valid[:, None].to(credit.rewards.dtype)


def _checked_tokens(name: str, values: Any, credit: CreditInputs) -> Tensor:
    shape = (len(credit.rewards), credit.width)
    if not isinstance(values, Tensor) or tuple(values.shape) != shape:
        raise AgentRLError(f"advantage estimator {name!r}: expected per-token advantages of shape {shape}, got "
                           f"{tuple(getattr(values, 'shape', ())) or type(values).__name__}")
    if values.requires_grad or not bool(torch.isfinite(values).all()):
        raise AgentRLError(f"advantage estimator {name!r}: advantages must be finite and carry no gradient")
    return values.to(credit.rewards.dtype)


@dataclass(frozen=True)
class RecipeAlgorithm:
    """The estimator, correction and policy loss a recipe names, with the recipe's settings for each."""

    recipe: Recipe
    estimator: Callable[..., Any]
    correction: Callable[..., CorrectionResult]
    policy: Callable[..., PolicyLossResult]
    level: str = "trajectory"

    @classmethod
    def from_recipe(cls, recipe: Recipe, plugin_manager: PluginManager | None = None) -> RecipeAlgorithm:
        if plugin_manager is None:
            from agentrl_plugins.plugins import get_plugin_manager

            plugin_manager = get_plugin_manager()
        estimator = plugin_manager.get("advantage", recipe.advantage.estimator)
        if estimator.needs_states and not plugin_manager.get("environment", recipe.environment.name).turn_states:
            raise RecipeError(f"{recipe.name}: advantage.estimator = {estimator.name!r} groups turns by their state "
                              f"keys, and environment {recipe.environment.name!r} emits none (its record does not "
                              "declare turn_states); pick a trajectory-level estimator such as grpo or rloo")
        if recipe.turn_reward.name != "none" and estimator.level == "trajectory":
            raise RecipeError(f"{recipe.name}: turn_reward.name = {recipe.turn_reward.name!r} rewards turns, and "
                              f"advantage.estimator = {estimator.name!r} gives one advantage per trajectory from its "
                              "reward alone, so the turn rewards would change nothing; pick a turn-level estimator "
                              "such as grpo_turns or gigpo, or turn_reward.name = 'none'")
        algorithm = cls(
            recipe,
            estimator.compute,
            plugin_manager.get("correction", recipe.correction.name).compute,
            plugin_manager.get("policy_loss", recipe.loss.policy).compute,
            estimator.level,
        )
        for key in unused_loss_keys(recipe, algorithm.loss_params()):
            warnings.warn(f"{recipe.name}: loss.{key} = {getattr(recipe.loss, key)!r} has no effect with loss.policy "
                          f"= {recipe.loss.policy!r}, which takes {', '.join(algorithm.loss_params()) or 'none'}",
                          UnusedSettingWarning, stacklevel=2)
        return algorithm

    def valid(self, terminations: Sequence[str]) -> Tensor:
        """True for trajectories that stay in the loss after compact filtering; an episode that ended in ``error``
        (the environment, its sandbox or a plugin failed) has no verdict and never does, whatever the filtering."""
        judged = torch.tensor([termination != "error" for termination in terminations], dtype=torch.bool)
        if not self.recipe.filtering.compact:
            return judged
        return compact_filter(terminations, self.recipe.filtering.reasons) & judged

    def advantages(self, rewards: Tensor, group_ids: Tensor, terminations: Sequence[str],
                   batch: TurnBatch | None = None) -> Advantages:
        """The estimator's advantages after compact filtering; a turn- or token-level estimator also needs the
        ``batch`` (its turns and their spans) and gives [B, T]."""
        valid = self.valid(terminations)
        return Advantages(estimated_advantages(self.estimator, self.level, self.recipe.advantage.estimator,
                                               self.recipe.advantage, rewards, group_ids, valid, batch), valid)

    @property
    def distills(self) -> bool:
        """Whether the recipe names a distillation teacher."""
        return self.recipe.distillation.enabled

    @property
    def needs_turns(self) -> bool:
        """Whether the advantage step needs each row's turn record: a turn- or token-level estimator's turns, or
        distillation's per-token values."""
        return self.level != "trajectory" or self.distills

    def distilled(self, advantages: Advantages, rows: TurnRows) -> Advantages:
        """:func:`with_distillation` with the recipe's ``[distillation]``."""
        return with_distillation(advantages, rows, self.recipe.distillation)

    def advantage_params(self) -> dict[str, float]:
        """The recipe's ``advantage.gamma``/``step_weight`` that the estimator takes, by name."""
        return named_params(self.estimator, self.recipe.advantage, ADVANTAGE_PARAMETERS)

    def correction_params(self) -> dict[str, float]:
        """The recipe's ``correction.cap``/``low``/``high`` that the correction takes, by name."""
        return named_params(self.correction, self.recipe.correction, CORRECTION_PARAMETERS)

    def correct(self, learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> CorrectionResult:
        """Per-token weights for the sampler/learner mismatch; the recipe's cap/low/high go to whichever it takes."""
        return self.correction(learner_logp, sampler_logp, mask, **self.correction_params())

    def loss_params(self) -> dict[str, Any]:
        """The recipe's ``loss.clip_low``/``clip_high``/``clip_c`` that the policy loss takes, by name."""
        return named_params(self.policy, self.recipe.loss, LOSS_PARAMETERS)

    def policy_loss(self, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                    weights: Tensor | None = None, sampler_logprobs: Tensor | None = None) -> PolicyLossResult:
        """The recipe's policy loss per token, with its parameters and the correction's ``weights``; advantages
        [B] (one per trajectory) or [B, T]. The result is checked without touching its values (this runs on every
        micro-batch): a loss of the wrong shape, or figures that are not floats or 0-dim tensors without
        gradient, is an error naming the plugin; a loss not finite on the mask is found where the step's loss is
        (:meth:`loss`, :func:`check_finite_loss`)."""
        inputs = PolicyLossInputs(
            logp=logprobs, old_logp=old_logprobs,
            sampler_logp=old_logprobs if sampler_logprobs is None else sampler_logprobs,
            advantages=(advantages[:, None] if advantages.dim() == 1 else advantages).expand_as(logprobs),
            mask=mask, weights=_ones_like(logprobs) if weights is None else weights.detach(),
            weighted=weights is not None)
        return self._checked(self.policy(inputs, **self.loss_params()), logprobs)

    def _checked(self, result: Any, logprobs: Tensor) -> PolicyLossResult:
        name = f"policy loss {self.recipe.loss.policy!r}"
        if not isinstance(result, PolicyLossResult):
            raise AgentRLError(f"{name} returned {type(result).__name__}, not a PolicyLossResult")
        loss = result.per_token_loss
        if not isinstance(loss, Tensor) or loss.shape != logprobs.shape:
            raise AgentRLError(f"{name}: per_token_loss must be a tensor of the log-probs' shape "
                               f"{tuple(logprobs.shape)}, got {getattr(loss, 'shape', type(loss).__name__)}")
        figures = result.metrics
        if "clip_fraction" not in figures or not all(map(_is_figure, figures.values())):
            kinds = {key: _kind(value) for key, value in figures.items()}
            raise AgentRLError(f"{name}: metrics must be floats or 0-dim tensors without gradient, with "
                               f"'clip_fraction' among them, got {kinds}")
        return result

    def loss(self, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
             weights: Tensor | None = None) -> Tensor:
        """The recipe's whole policy loss on one batch: :meth:`policy_loss`, aggregated as ``loss.aggregation``
        says (a framework with its own micro-batch denominators aggregates :meth:`policy_loss` itself)."""
        per_token = self.policy_loss(logprobs, old_logprobs, advantages, mask, weights).per_token_loss
        loss = self.recipe.loss
        value = aggregate_loss(per_token, mask, loss.aggregation, norm_constant=loss.norm_constant)
        check_finite_loss(loss.policy, value.item())
        return value


def with_distillation(advantages: Advantages, rows: TurnRows, settings: DistillationSection) -> Advantages:
    """``advantages`` with each row's per-token values (distillation's signal, carried by its turn record) added on
    its policy tokens, as [B, T] with 0 off them; the estimator's own part stays only with ``settings.task_reward``.
    Rows not ``advantages.valid`` get 0 from the signal. Unchanged without a teacher."""
    if not settings.enabled:
        return advantages
    task = advantages.per_token(rows.response_mask.size(1))
    missing = [row for row, (values, spans) in enumerate(zip(rows.token_values, rows.turn_spans, strict=True))
               if not values and any(end > start for start, end in spans)]
    if missing or len(rows.token_values) != task.size(0):
        raise AgentRLError(f"distillation: rows {missing[:5] or list(range(task.size(0)))[:5]} carry no teacher "
                           "signal (their episodes were not scored by the teacher: an episode service without "
                           "distillation.teacher played them)")
    dense = dense_advantages(rows.token_values, rows.turn_spans, task)
    kept = advantages.valid.to(task.device)[:, None].to(task.dtype)
    own = task if settings.task_reward else torch.zeros_like(task)
    policy = rows.response_mask.to(device=task.device, dtype=task.dtype)
    return Advantages((own + dense * kept) * policy, advantages.valid)


def check_finite_loss(policy: str, loss: float) -> None:
    """An error naming the policy loss where a step's aggregated loss is not finite (a loss term on the mask is
    NaN or infinite); adapters call it with the loss their step has already gathered, so it costs no sync."""
    if not math.isfinite(loss):
        raise AgentRLError(f"policy loss {policy!r}: the loss is {loss}, not finite on the loss mask")


def _ones_like(values: Tensor) -> Tensor:
    """Ones of ``values``' shape as a broadcast view of one element: nothing to fill."""
    return torch.ones((), dtype=values.dtype, device=values.device).expand_as(values)


def _is_figure(value: object) -> bool:
    return isinstance(value, float) or (isinstance(value, Tensor) and value.dim() == 0 and not value.requires_grad)


def _kind(value: object) -> str:
    if isinstance(value, Tensor):
        return f"Tensor of shape {tuple(value.shape)}" + (" with gradient" if value.requires_grad else "")
    return type(value).__name__
