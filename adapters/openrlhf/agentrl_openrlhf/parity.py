"""OpenRLHF's side of ``agentrl compare --parity``: the batch through OpenRLHF 0.11.2's own code.

The adapter's flags go through OpenRLHF's own command line (``train_ppo_ray``, stopped where
training would start) and the runtime-env hook's patches are installed, as in every worker, for the
duration of the computation (OpenRLHF's classes and globals are restored afterwards).
The batch becomes one ``Experience`` (compact-filtered samples have an empty action mask, as
the shipped executor's ``action_ranges=[]`` gives them); ``RemoteExperienceMaker.compute_
advantages_and_returns`` makes the advantages; ``PolicyLoss``, built as ``ppo_actor`` builds
it, makes the loss with ``_optimizer_step_loss_norm``'s denominators for one micro-batch on each
data-parallel rank (``ParityBatch.rank_rows``; the loss is the ranks' mean, as DeepSpeed's averaging leaves it).
Per-token weights: OpenRLHF keeps its correction coefficients inside ``PolicyLoss.forward``,
so they are read off a probe (ratio 1, advantage -1, token-sum), whose gradient is exactly
the coefficient; with a patched loss they are the patch's core correction. The figures are the recorder's
(``train_row``) from what OpenRLHF's status holds for the step: ``PolicyLoss``'s clip and filter ratios, and
the entropy as ``ppo_actor`` aggregates it (only when the recipe sets an entropy coefficient, as there).

OpenRLHF imports vLLM and flash-attn at module top: where they are not installed (a CPU
machine) the CPU backend's import shims go on the path first. It is
registered as the adapter's ``parity`` side (:mod:`agentrl_plugins.compare.side`).
"""

from __future__ import annotations

import runpy
import sys
from types import SimpleNamespace
from typing import Any

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.compare.batch import ParityBatch, ParityResult
from agentrl_plugins.compare.side import gradient, mapping_rows, versions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import FIGURES

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.config import CLI_MODULE, plan
from agentrl_openrlhf.cpu import use_shims_where_missing
from agentrl_openrlhf.patches import installed
from agentrl_openrlhf.recorder import step_rows, train_row
from agentrl_openrlhf.terminations import termination_logs
from agentrl_openrlhf.turn_label import TurnLabel


class _Parsed(Exception):
    """Raised where OpenRLHF's command line would start training; carries its parsed arguments."""

    def __init__(self, args: Any):
        super().__init__("train_ppo_ray stopped before training")
        self.parsed = args


def parsed_args(command: list[str]) -> Any:
    """OpenRLHF's own parsing and validation of ``command``'s flags (its ``get_strategy`` never runs)."""
    import openrlhf.utils
    import ray

    def stop(args: Any) -> None:
        raise _Parsed(args)

    saved = openrlhf.utils.get_strategy, ray.is_initialized, sys.argv
    openrlhf.utils.get_strategy = stop
    ray.is_initialized = lambda: True
    sys.argv = [CLI_MODULE, *command[command.index(CLI_MODULE) + 1:]]
    try:
        runpy.run_module(CLI_MODULE, run_name="__main__")
    except _Parsed as parsed:
        return parsed.parsed
    finally:
        openrlhf.utils.get_strategy, ray.is_initialized, sys.argv = saved
    raise AgentRLError(f"{CLI_MODULE} returned without reaching get_strategy")


def policy_loss(args: Any, **changes: Any):
    """``PolicyLoss`` as ``ppo_actor`` builds it from ``args`` (``changes`` replace constructor arguments)."""
    from openrlhf.models.loss import PolicyLoss

    settings = dict(clip_eps_low=args.actor.eps_clip_low_high[0], clip_eps_high=args.actor.eps_clip_low_high[1],
                    dual_clip=args.actor.dual_clip, token_level_loss=args.actor.loss_agg_mode == "token-mean",
                    policy_loss_type=args.actor.policy_loss_type,
                    is_correction_level=args.algo.advantage.is_correction_level,
                    is_correction_mode=args.algo.advantage.is_correction_mode,
                    is_correction_gating=args.algo.advantage.is_correction_gating,
                    is_correction_threshold=args.algo.advantage.is_correction_threshold)
    return PolicyLoss(**{**settings, **changes})


def experience(batch: ParityBatch, action_mask: torch.Tensor, recipe: Recipe) -> Any:
    """The batch as one OpenRLHF ``Experience`` in rollout order, with the executor's termination logs and its
    labels carrying the turns."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    logs = [termination_logs(t) for t in batch.terminations]
    info = {"reward": batch.rewards.clone(), **{key: torch.tensor([log[key] for log in logs]) for key in logs[0]}}
    labels = [TurnLabel(str(row), record) for row, record in enumerate(batch.turn_records(recipe))]
    return Experience(action_mask=action_mask, action_log_probs=batch.old_logprobs,
                      rollout_log_probs=batch.sampler_logprobs, kl=torch.zeros_like(batch.old_logprobs),
                      rewards=batch.rewards.clone(), index=list(range(len(batch.rewards))), labels=labels,
                      info=info)


def native_weights(args: Any, batch: ParityBatch, action_mask: torch.Tensor) -> torch.Tensor:
    """OpenRLHF's correction coefficient per token: the gradient of a token-sum probe at ratio 1, advantage -1."""
    probe = policy_loss(args, clip_eps_low=0.2, clip_eps_high=0.2, dual_clip=None, token_level_loss=True)
    logprobs = batch.old_logprobs.clone().requires_grad_()
    loss = probe(logprobs, batch.old_logprobs, -action_mask.to(logprobs.dtype), action_mask,
                 batch.sampler_logprobs, batch_num_tokens=1.0)[0]
    return gradient(loss, logprobs) * action_mask


def compute(recipe: Recipe, batch: ParityBatch) -> ParityResult:
    """The batch through OpenRLHF's own code; OpenRLHF's classes and globals are left as they were."""
    use_shims_where_missing()
    config = OpenRLHFAdapter().describe(recipe)
    args = parsed_args(config.command)
    with installed(recipe):
        return compute_patched(recipe, batch, config, args)


ENTROPY_NOTE = {"entropy": "OpenRLHF's entropy_loss is each micro-batch's aggregate over the step's denominators "
                           "times dp_size, averaged over micro-batches and ranks by their tokens: the step's token "
                           "mean only with one micro-batch on one rank"}


def ranks_loss(args: Any, batch: ParityBatch, logprobs: torch.Tensor, advantages: torch.Tensor,
               action_mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """``PolicyLoss`` on each data-parallel rank's rows (one micro-batch each) with ``_optimizer_step_loss_norm``'s
    denominators over every rank's mask (what its all-reduce sums); the mean over ranks (what DeepSpeed's gradient
    averaging leaves) and the status OpenRLHF logs, each rank's value weighted by its loss tokens as
    ``ppo_actor`` reduces it."""
    from openrlhf.models.loss import aggregate_loss
    from openrlhf.utils.loss_utils import _optimizer_step_loss_norm

    ranks = batch.rank_rows()
    norm = _optimizer_step_loss_norm([action_mask[rows] for rows in ranks], None, batch.ranks, 1)
    loss_fn = policy_loss(args)
    losses, values, tokens = [], [], []
    for rows in ranks:
        mask = action_mask[rows]
        loss, clip_ratio, _, _, is_filter_ratio = loss_fn(logprobs[rows], batch.old_logprobs[rows], advantages[rows],
                                                          mask, batch.sampler_logprobs[rows], **norm)
        losses.append(loss)
        tokens.append(mask.sum().item())
        values.append({"ppo_clip_ratio": clip_ratio.item(),
                       **({} if is_filter_ratio is None else {"is_filter_ratio": is_filter_ratio.item()}),
                       **({} if args.actor.entropy_coef is None else
                          {"entropy_loss": aggregate_loss(batch.entropies[rows], mask, **norm).item()})})
    total = sum(tokens) or 1.0
    status = {key: sum(v[key] * t for v, t in zip(values, tokens)) / total for key in values[0]}
    return torch.stack(losses).mean(), status


def compute_patched(recipe: Recipe, batch: ParityBatch, config: Any, args: Any) -> ParityResult:
    """The numbers, with the runtime-env hook's patches installed for ``recipe``."""
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    algorithm = RecipeAlgorithm.from_recipe(recipe)
    valid = algorithm.valid(batch.terminations)
    action_mask = batch.response_mask.bool() & valid[:, None]
    maker = RemoteExperienceMaker(None, None, None, None, FixedKLController(args.algo.kl.init_coef),
                                  SimpleNamespace(args=args), None)
    (made,) = maker.compute_advantages_and_returns([experience(batch, action_mask, recipe)])
    advantages = made.advantages * action_mask
    if not algorithm.needs_turns:  # one value per row, unless turns or a teacher made them per token
        advantages = advantages.sum(-1) / action_mask.sum(-1).clamp(min=1)
    if plan(recipe).policy_loss:
        weights = algorithm.correct(batch.old_logprobs, batch.sampler_logprobs, action_mask).weights
    else:
        weights = native_weights(args, batch, action_mask)
    logprobs = batch.logprobs.clone().requires_grad_()
    loss, status = ranks_loss(args, batch, logprobs, made.advantages, action_mask)
    status = {"hacked": batch.hacked.double().mean().item(), **status}
    made.info["filtered"] = (~valid).double()
    row = train_row(1, status, step_rows([made]), 0.0)
    return ParityResult("openrlhf", advantages.detach(), weights.detach(), loss.item(), gradient(loss, logprobs),
                        versions("openrlhf", "agentrl-openrlhf"), mapping_rows(config),
                        figures={name: getattr(row, name) for name in FIGURES},
                        figure_notes=ENTROPY_NOTE if batch.ranks > 1 and args.actor.entropy_coef is not None else {})
