"""Replacements for OpenRLHF 0.11.2 methods that put the core's estimator, correction and aggregation in its workers.

OpenRLHF has no registry for estimators or losses, so the runtime-env hook replaces methods on
the classes themselves (instances look methods up on their class, so every worker's objects use
them). Each target is checked first: the class must exist and the method must have the 0.11.2
parameters, else :class:`PatchError` names the target, what was found and the installed version.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import torch

from agentrl_plugins.algorithm import Advantages, RecipeAlgorithm
from agentrl_plugins.algorithms.corrections import limited_fraction
from agentrl_plugins.algorithms.credit import TurnRows, check_turn_records
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe

from agentrl_openrlhf.aggregation import step_loss
from agentrl_openrlhf.config import plan
from agentrl_openrlhf.segments import RowEpisodes, make_experience_method, ppo_train_method, process_response_method
from agentrl_openrlhf.terminations import terminations_from_info
from agentrl_openrlhf.turn_label import labelled_turns

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

OPENRLHF_VERSION = "0.11.2"
EXPERIENCE_MAKER = ("openrlhf.trainer.ppo_utils.experience_maker", "RemoteExperienceMaker",
                    "compute_advantages_and_returns", ("self", "experiences"))
POLICY_LOSS = ("openrlhf.models.loss", "PolicyLoss", "forward",
               ("self", "log_probs", "old_log_probs", "advantages", "action_mask", "rollout_log_probs", "dp_size",
                "batch_num_tokens", "global_batch_size"))


RAY_TRACE_PARAMETER = "_ray_trace_ctx"
"""Ray adds this keyword to the signature of every method of an actor class; it is not OpenRLHF's."""
TRAINING_STEP = ("openrlhf.trainer.ray.ppo_actor", "ActorPPOTrainer", "training_step",
                 ("self", "experience", "kl_ctl", "step", "loss_batch_info"))
PPO_TRAIN = ("openrlhf.trainer.ray.ppo_actor", "ActorPPOTrainer", "ppo_train", ("self", "kl_ctl"))
PROCESS_RESPONSE = ("openrlhf.trainer.ppo_utils.samples_generator", "SamplesGenerator",
                    "_process_response_into_experience", ("self", "response", "generate_kwargs"))
MAKE_EXPERIENCE_BATCH = ("openrlhf.trainer.ppo_utils.experience_maker", "RemoteExperienceMaker",
                         "make_experience_batch", ("self", "rollout_samples"))
EMPTY_MICRO_BATCH_TOKENS = 1e-6


class PatchError(AgentRLError):
    """An OpenRLHF method to patch is missing or has changed."""


@dataclass(frozen=True)
class Patch:
    """``owner.name = replacement``."""

    owner: type
    name: str
    replacement: Callable[..., Any]

    def apply(self) -> None:
        setattr(self.owner, self.name, self.replacement)


def _installed_version() -> str:
    try:
        return importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def target(module: str, owner: str, method: str, parameters: tuple[str, ...]) -> type:
    """The class ``module.owner`` (a Ray actor's own class) once ``method`` takes exactly ``parameters``."""
    where = f"{module}.{owner}.{method}"
    found = f"agentrl-openrlhf patches OpenRLHF {OPENRLHF_VERSION}; installed: {_installed_version()}"
    try:
        cls = getattr(importlib.import_module(module), owner)
        cls = getattr(getattr(cls, "__ray_metadata__", None), "modified_class", cls)
        function = getattr(cls, method)
    except (ImportError, AttributeError) as error:
        raise PatchError(f"cannot patch {where}: {error} ({found})") from None
    actual = tuple(name for name in inspect.signature(function).parameters if name != RAY_TRACE_PARAMETER)
    if actual != parameters:
        raise PatchError(f"cannot patch {where}: expected parameters {parameters}, found {actual} ({found})")
    return cls


def advantages_method(algorithm: RecipeAlgorithm) -> Callable[..., Any]:
    """``compute_advantages_and_returns`` with the recipe's estimator in place of OpenRLHF's if/elif chain.

    Length penalties, the KL reward, reward clipping and the per-token returns are OpenRLHF's.
    Groups are consecutive ``n_samples_per_prompt`` samples of the rollout order, as in OpenRLHF; an agent program's
    later segments (rows after the episodes, :mod:`agentrl_openrlhf.segments`) are not counted in them and carry
    their episode's advantage.
    A trajectory's advantage is its reward at the last action token, returned to every earlier token as
    OpenRLHF's REINFORCE returns do; per-token advantages (a turn-level estimator, from the turns the labels
    carry) are added to the returns of the KL reward alone, clipped by the same range (the logged ``return`` then
holds their mean over the action tokens).
    """
    from openrlhf.models.utils import compute_reward
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    @torch.no_grad()
    def compute_advantages_and_returns(self, experiences):
        args = self.strategy.args
        for experience in experiences:
            experience.rewards = experience.rewards.to(torch.promote_types(experience.rewards.dtype, torch.float32))
        apply_length_penalties(experiences, args)
        index = torch.tensor([i for e in experiences for i in e.index])
        rows = RowEpisodes.of(self, len(index))
        first = rows.is_episode(index)
        rewards = torch.cat([e.rewards for e in experiences])[first]
        ended = [reason for e in experiences for reason in terminations_from_info(e.info, len(e.index))]
        turns = experience_turns(algorithm, experiences)
        episodes = algorithm.advantages(rewards, index[first] // args.rollout.n_samples_per_prompt,
                                        [reason for reason, kept in zip(ended, first.tolist()) if kept],
                                        turns if algorithm.level != "trajectory" else None)
        values = rows.row_values(episodes, index)
        if turns is not None and algorithm.distills:  # each row's teacher signal, segments included
            values = algorithm.distilled(Advantages(values, turns.response_mask.sum(-1) > 0), turns).values
        for experience, advantage in zip(experiences, values.split([len(e.index) for e in experiences])):
            clip = args.reward.clip_range
            if advantage.dim() == 1:
                reward = compute_reward(advantage, self.kl_ctl.value, experience.kl,
                                        action_mask=experience.action_mask, reward_clip_range=clip)
                experience.returns = self.get_cumulative_returns(reward, experience.action_mask, 1.0)
                experience.info["return"] = reward.sum(dim=-1)
            else:
                mask = experience.action_mask
                tokens = advantage[:, :mask.size(1)].to(experience.kl.dtype)
                tokens = tokens.clamp(*clip) if clip else tokens
                reward = compute_reward(torch.zeros_like(experience.rewards), self.kl_ctl.value, experience.kl,
                                        action_mask=mask)
                experience.returns = self.get_cumulative_returns(reward, mask, 1.0) + tokens
                experience.info["return"] = reward.sum(-1) + (tokens * mask).sum(-1) / mask.sum(-1).clamp(min=1)
            experience.advantages = experience.returns.clone()
            experience.kl = None
        return experiences

    return compute_advantages_and_returns


def experience_turns(algorithm: RecipeAlgorithm, experiences: Sequence[Any]) -> TurnRows | None:
    """For a turn- or token-level estimator or a distillation teacher, every sample's turns (from its label)
    against the action masks, right-padded to the widest micro-batch; else None."""
    if not algorithm.needs_turns:
        return None
    width = max(e.action_mask.size(1) for e in experiences)
    mask = torch.cat([torch.nn.functional.pad(e.action_mask.float(), (0, width - e.action_mask.size(1)))
                      for e in experiences])
    labels = [label for e in experiences for label in e.labels]
    estimator = algorithm.recipe.advantage.estimator
    try:
        records = check_turn_records(labelled_turns(labels, estimator), mask, f"advantage.estimator = {estimator!r}")
    except ValueError as error:
        raise PatchError(str(error)) from None
    return TurnRows.of(records, mask)


def policy_loss_forward(algorithm: RecipeAlgorithm) -> Callable[..., Any]:
    """``PolicyLoss.forward`` from the core: surrogate, correction and aggregation, all with the recipe's settings.

    The recipe (the run folder's ``recipe.toml``) is the only source of the loss settings: the clip range
    and dual clip come from ``loss.*``, not from the ``PolicyLoss`` attributes OpenRLHF set from its
    flags (the launcher sets those flags from the same keys). The correction compares the trainer's
    log-probs before the update (``old_log_probs``) with the rollout engine's, as OpenRLHF's own does.
    Returns OpenRLHF's five values; the last two (rollout KL, share of capped or masked tokens) are None
    without a correction.
    """
    from openrlhf.models.utils import masked_mean

    recipe = algorithm.recipe
    corrected = recipe.correction.name != "none"

    def forward(self, log_probs, old_log_probs, advantages, action_mask=None, rollout_log_probs=None, dp_size=1,
                batch_num_tokens=None, global_batch_size=None):
        if self.policy_loss_type != "ppo":
            raise PatchError(f"the recipe's loss replaces OpenRLHF's ppo loss, not {self.policy_loss_type!r}")
        correction = None
        if corrected:
            if rollout_log_probs is None:
                raise PatchError(f"correction {recipe.correction.name!r} needs the rollout engine's log-probs")
            correction = algorithm.correct(old_log_probs, rollout_log_probs, action_mask)
        surrogate = algorithm.policy_loss(log_probs, old_log_probs, advantages, action_mask,
                                          None if correction is None else correction.weights, rollout_log_probs)
        loss = step_loss(surrogate.per_token_loss, action_mask, recipe.loss, dp_size, batch_num_tokens,
                         global_batch_size)
        clip_ratio = torch.as_tensor(surrogate.metrics["clip_fraction"], dtype=loss.dtype, device=loss.device)
        ppo_kl = masked_mean((old_log_probs - log_probs).detach(), action_mask, dim=None)
        if correction is None:
            return loss, clip_ratio, ppo_kl, None, None
        rollout_kl = masked_mean(rollout_log_probs - old_log_probs, action_mask, dim=None)
        filtered = limited_fraction(correction.metrics)
        return loss, clip_ratio, ppo_kl, rollout_kl, torch.tensor(filtered, device=loss.device)

    return forward


def training_step_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """``ActorPPOTrainer.training_step`` reporting a tiny token count for a micro-batch with no loss token.

    ``ActorPPOTrainer.ppo_train`` divides a micro-batch's token-weighted metrics by its loss-token
    count (``ppo_actor.py:216-219``): 0, and a ZeroDivisionError, when compact filtering emptied
    every episode of it (or it is made of the rows without loss tokens :func:`agentrl_openrlhf.segments.spread`
    pads a rank with). The count only weights metrics, so such a micro-batch's metrics come out
    as its own (zero-loss) values and weigh nothing beside any other micro-batch.
    """

    @functools.wraps(original)
    def training_step(self, experience, kl_ctl, step, loss_batch_info=None):
        status = original(self, experience, kl_ctl, step, loss_batch_info)
        status["num_action_tokens"] = max(status["num_action_tokens"], EMPTY_MICRO_BATCH_TOKENS)
        return status

    return training_step


def patches(recipe: Recipe, plugin_manager: PluginManager | None = None) -> list[Patch]:
    """The patches ``recipe`` needs (none when OpenRLHF is exactly equivalent), each target checked."""
    needed = plan(recipe)
    algorithm = RecipeAlgorithm.from_recipe(recipe, plugin_manager)
    found: list[Patch] = []
    if needed.advantages:
        found.append(Patch(target(*EXPERIENCE_MAKER), EXPERIENCE_MAKER[2], advantages_method(algorithm)))
    if needed.policy_loss:
        found.append(Patch(target(*POLICY_LOSS), POLICY_LOSS[2], policy_loss_forward(algorithm)))
    if needed.segments:
        for spec, wrap in ((PROCESS_RESPONSE, process_response_method), (MAKE_EXPERIENCE_BATCH, make_experience_method),
                           (PPO_TRAIN, ppo_train_method)):
            owner = target(*spec)
            found.append(Patch(owner, spec[2], wrap(getattr(owner, spec[2]))))
    if recipe.filtering.compact or needed.segments:
        owner = target(*TRAINING_STEP)
        found.append(Patch(owner, TRAINING_STEP[2], training_step_method(owner.training_step)))
    return found


def install(recipe: Recipe) -> list[str]:
    """Apply every patch ``recipe`` needs in this process; returns the patched ``Class.method`` names."""
    applied = patches(recipe)
    for patch in applied:
        patch.apply()
    return [f"{patch.owner.__name__}.{patch.name}" for patch in applied]


@contextlib.contextmanager
def installed(recipe: Recipe) -> Iterator[list[str]]:
    """:func:`install` for the duration of the block, every patched class as it was afterwards."""
    saved = [(patch.owner, patch.name, patch.owner.__dict__.get(patch.name)) for patch in patches(recipe)]
    try:
        yield install(recipe)
    finally:
        for owner, name, original in saved:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
