"""verl's side of ``agentrl compare --parity``: the batch through verl 0.9.1's own trainer functions.

The recipe becomes verl's composed ``ppo_trainer`` config through the adapter's overrides.
Then, in the trainer's order: the agent loop's compact filter zeroes filtered rows'
``response_mask``; ``compute_rollout_correction_and_add_to_batch`` (rollout IS weights and
rejection); ``compute_advantage`` with the configured estimator (a turn-level one reads the batch's
turns as the recording trainer hands them over); the configured policy loss
(``get_policy_loss_fn``) with the actor config's ``global_batch_info`` for one mini-batch on each
data-parallel rank (``ParityBatch.rank_rows``; the loss is the ranks' mean, as FSDP's all-reduce leaves
it). The reported advantages have the adapter's row scale divided out; the figures are the recorder's
(``step_rows``) from the batch as episode records and what verl logs for the step (the policy loss's and
the rollout correction's metrics, the trainer's entropy over the loss tokens, and the mismatch sums of the old
policy against the sampler, as the driver logs them before the correction rejects a token).
Registered as the adapter's ``parity`` side (:mod:`agentrl_plugins.compare.side`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig
from verl import DataProto
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.py_functional import rename_dict

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms.mismatch import MismatchSums
from agentrl_plugins.compare.batch import ParityBatch, ParityResult
from agentrl_plugins.compare.side import gradient, mapping_rows, versions
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import FIGURES, loss_token_mean
from agentrl_plugins.runs.rundir import write_recipe_file

from agentrl_verl.config import command, default_paths, describe, injects_loss
from agentrl_verl.episodes import EpisodeRecord
from agentrl_verl.mismatch import driver_metrics
from agentrl_verl.names import PREFIX, policy_loss_name
from agentrl_verl.recorder import ENTROPY_KEY, step_rows
from agentrl_verl.verl_plugin.estimators import carried_turns, row_scale
from agentrl_verl.verl_plugin.losses import correct_raw_ratios


def verl_config(recipe: Recipe, run_dir: Path) -> DictConfig:
    """verl's own ``ppo_trainer`` config composed with the adapter's overrides for ``recipe``, whose workers read
    ``run_dir``'s ``recipe.toml`` as a launched run's do."""
    write_recipe_file(run_dir / "recipe.toml", recipe)
    paths = dataclasses.replace(default_paths(recipe), run_dir=run_dir)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=command(describe(recipe, paths).native)[3:])


def token_rewards(batch: ParityBatch) -> torch.Tensor:
    """Each reward on its trajectory's last policy token, as verl's reward step places it."""
    mask = batch.response_mask
    last = (mask * torch.arange(mask.size(1), dtype=mask.dtype)).argmax(dim=-1)
    scores = torch.zeros_like(mask)
    scores[torch.arange(mask.size(0)), last] = batch.rewards
    return scores


def compute(recipe: Recipe, batch: ParityBatch) -> ParityResult:
    with tempfile.TemporaryDirectory() as run_dir:
        return compute_in(recipe, batch, verl_config(recipe, Path(run_dir)))


def compute_in(recipe: Recipe, batch: ParityBatch, config: DictConfig) -> ParityResult:
    algorithm, actor = config.algorithm, omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    core = RecipeAlgorithm.from_recipe(recipe)
    valid = core.valid(batch.terminations)
    mask = batch.response_mask * valid[:, None].to(batch.response_mask.dtype)
    uid = np.array([str(g) for g in batch.group_ids.tolist()], dtype=object)
    data = DataProto.from_single_dict({"token_level_rewards": token_rewards(batch), "response_mask": mask.clone(),
                                       "old_log_probs": batch.old_logprobs, "rollout_log_probs": batch.sampler_logprobs,
                                       "uid": uid})
    data, correction_metrics = compute_rollout_correction_and_add_to_batch(data, algorithm.rollout_correction)
    with carried_turns(batch.turn_records(recipe)):
        data = compute_advantage(data, adv_estimator=algorithm.adv_estimator, gamma=algorithm.gamma,
                                 lam=algorithm.lam, num_repeat=config.actor_rollout_ref.rollout.n,
                                 norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
                                 config=algorithm)
    response_mask = data.batch["response_mask"]
    is_weights = data.batch["rollout_is_weights"] if "rollout_is_weights" in data.batch.keys() else None
    logprobs = batch.logprobs.clone().requires_grad_()
    loss, loss_metrics = ranks_loss(batch, actor, logprobs, data.batch["advantages"], response_mask, is_weights)
    injected = algorithm.adv_estimator.startswith(PREFIX)
    scale = row_scale(actor.loss_agg_mode, response_mask.sum(-1) > 0) if injected else 1.0
    advantages = data.batch["advantages"] * response_mask
    if not core.needs_turns:  # one value per row, unless turns or a teacher made them per token
        advantages = advantages.sum(-1) / response_mask.sum(-1).clamp(min=1)
    if recipe.correction.name != "none" and actor.policy_loss.loss_mode == policy_loss_name(recipe.correction.name):
        is_weights = correct_raw_ratios(recipe.correction.name, actor, is_weights, response_mask).weights
    weights = response_mask if is_weights is None else is_weights * response_mask
    logged = {**correction_metrics, **rename_dict(loss_metrics, "actor/"),
              ENTROPY_KEY: loss_token_mean(batch.entropies, response_mask),
              **driver_metrics(MismatchSums.of(batch.old_logprobs, batch.sampler_logprobs, mask))}
    return ParityResult("verl", advantages / scale, weights.detach(), loss.item(),
                        gradient(loss, logprobs), versions("verl", "agentrl-verl"), mapping_rows(describe(recipe)),
                        figures=recorded_figures(recipe, batch, valid, logged),
                        figure_notes=rank_mean_notes(recipe, batch.ranks))


RANK_MEAN = ("verl logs the policy loss's token shares as a MEAN metric: on {ranks} ranks, the mean of each rank's "
             "share, not the share of the step's loss tokens")


def rank_mean_notes(recipe: Recipe, ranks: int) -> dict[str, str]:
    """The figures verl averages over ranks (its policy loss's ``MEAN`` metrics) when there is more than one."""
    if ranks == 1:
        return {}
    names = ["clip_fraction", *(["is_capped_fraction"] if injects_loss(recipe) else [])]
    return {name: RANK_MEAN.format(ranks=ranks) for name in names}


def ranks_loss(batch: ParityBatch, actor: Any, logprobs: torch.Tensor, advantages: torch.Tensor,
               response_mask: torch.Tensor, is_weights: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, Any]]:
    """The configured policy loss on each data-parallel rank's rows (one mini-batch each), with the global batch's
    ``dp_size``, token count and row count as verl's engine sets them; the mean over ranks (what FSDP's gradient
    all-reduce leaves) and each metric averaged over ranks, as verl reduces its ``MEAN`` metrics."""
    actor.global_batch_info.update(dp_size=batch.ranks, batch_num_tokens=response_mask.sum().item(),
                                   global_batch_size=response_mask.size(0), loss_scale_factor=actor.loss_scale_factor)
    policy_loss = get_policy_loss_fn(actor.policy_loss.loss_mode)
    losses, metrics = [], []
    for rows in batch.rank_rows():
        loss, rank_metrics = policy_loss(batch.old_logprobs[rows], logprobs[rows], advantages[rows],
                                         response_mask[rows].bool(), actor.loss_agg_mode, actor,
                                         None if is_weights is None else is_weights[rows])
        losses.append(loss)
        metrics.append(rank_metrics)
    return torch.stack(losses).mean(), {key: float(np.mean([float(m[key]) for m in metrics])) for key in metrics[0]}


def recorded_figures(recipe: Recipe, batch: ParityBatch, valid: torch.Tensor,
                     logged: dict[str, Any]) -> dict[str, Any]:
    """The step's figures as the recorder makes them: the batch as the agent loop's episode records, and
    ``logged`` as what verl logs for the step."""
    episodes = [EpisodeRecord(split="train", weights_version=0, task_id=str(row), termination=batch.terminations[row],
                              reward=batch.rewards[row].item(), passed=False, hacked=bool(batch.hacked[row]),
                              filtered=not bool(valid[row]), prompt_ids=[0],
                              response_ids=[0] * batch.response_mask.size(1),
                              policy_mask=batch.response_mask[row].long().tolist(),
                              logprobs=batch.sampler_logprobs[row].tolist()) for row in range(len(batch.rewards))]
    (row,) = step_rows(episodes, {1: logged}, recipe)
    return {name: getattr(row, name) for name in FIGURES}
