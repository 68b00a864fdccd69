"""verl's update without its old-log-prob pass, where that pass only repeats the update's own forward.

With one PPO epoch of one mini-batch, the weights that score a step's old policy are the ones the update starts
from: the update's forward computes the same log-probs, and TRL takes them there (``old = logps.detach()``, the
ratio exactly 1). verl 0.9.1 always runs a separate forward first (``_compute_old_log_prob``) unless its bypass
mode takes the sampler's log-probs, which are not the learner's. Where the recording trainer decides so
(:func:`agentrl_verl.verl_plugin.trainer.on_policy_update`: on a CPU wherever it is exact, elsewhere when
``+agentrl.on_policy_update=true`` asks) it skips that pass and marks the update (:data:`ON_POLICY`); every
worker's ``ppo_loss`` then gives verl's policy loss the update's own log-probs, detached, as the old policy's, and
logs what the skipped pass gave: the step's entropy (the recorder's mean over loss tokens, and verl's
``actor/entropy``) and, where the sampler's log-probs are there, the sums of the sampler/learner mismatch figures
(:mod:`agentrl_verl.mismatch`; verl's own ``training/rollout_probs_diff_*`` and ``rollout_corr/*`` figures, which
need the skipped pass, are not logged).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Callable, Iterator

from verl.utils import tensordict_utils as tu
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.padding import no_padding_2_padding

from agentrl_plugins.algorithms.mismatch import MismatchSums

from agentrl_verl.mismatch import KEY

ON_POLICY = "agentrl_on_policy"
"""The update's ``extra_info`` flag, which reaches each micro-batch's loss."""
ENTROPY_METRIC = "agentrl/token_mean_entropy"
"""The entropy figure as the update logs it (verl prefixes ``actor/``: the recorder's ``ENTROPY_KEY``)."""
VERL_ENTROPY = "actor/entropy"
"""verl's own entropy figure, which its skipped pass logs: the entropy aggregated as the loss aggregates."""
_on_policy: contextvars.ContextVar[bool] = contextvars.ContextVar("agentrl_on_policy", default=False)


@contextlib.contextmanager
def on_policy() -> Iterator[None]:
    token = _on_policy.set(True)
    try:
        yield
    finally:
        _on_policy.reset(token)


def policy_loss_lookup(original: Callable[[str], Callable[..., Any]]) -> Callable[[str], Callable[..., Any]]:
    """``get_policy_loss_fn`` whose losses, inside :func:`on_policy`, take the learner's own log-probs, detached,
    as the old policy's."""

    @functools.wraps(original)
    def get_policy_loss_fn(name: str) -> Callable[..., Any]:
        loss = original(name)

        @functools.wraps(loss)
        def policy_loss(*args: Any, old_log_prob: Any = None, log_prob: Any = None, **kwargs: Any) -> Any:
            if _on_policy.get():
                old_log_prob = log_prob.detach()
            return loss(*args, old_log_prob=old_log_prob, log_prob=log_prob, **kwargs)

        return policy_loss

    return get_policy_loss_fn


def padded(data: Any, field: str) -> Any:
    return data.select(field).to_padded_tensor()[field]


def entropy_metric(model_output: Any, data: Any) -> Metric:
    """The micro-batch's share of the step's mean entropy over loss tokens: its sum over the step's token count
    (both over every data-parallel rank), summed over micro-batches and averaged over ranks by verl."""
    entropy = no_padding_2_padding(model_output["entropy"], data)
    mask = padded(data, "response_mask").to(entropy.dtype)
    share = (entropy * mask).sum() / data["batch_num_tokens"] * data["dp_size"]
    return Metric(value=share.detach(), aggregation=AggregationType.SUM)


def mismatch_metrics(model_output: Any, data: Any) -> dict[str, Metric]:
    """The micro-batch's mismatch sums (the update's own log-probs against the sampler's, over its loss tokens)."""
    learner = no_padding_2_padding(model_output["log_probs"], data).detach()
    sampler, mask = padded(data, "rollout_log_probs"), padded(data, "response_mask")
    width = min(learner.shape[1], sampler.shape[1])
    sums = MismatchSums.of(learner[:, :width], sampler[:, :width], mask[:, :width])
    return {KEY + name: Metric(value=getattr(sums, name),
                               aggregation=AggregationType.MAX if name == "gap_max" else AggregationType.SUM)
            for name in MismatchSums.names()}


def ppo_loss_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``ppo_loss``, on-policy where the update is marked :data:`ON_POLICY`."""

    @functools.wraps(original)
    def ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> Any:
        if not tu.get_non_tensor_data(data=data, key=ON_POLICY, default=False):
            return original(config, model_output, data, dp_group)
        with on_policy():
            loss, metrics = original(config, model_output, data, dp_group)
        metrics[ENTROPY_METRIC] = entropy_metric(model_output, data)
        entropy = metrics["actor/entropy_loss"]
        metrics[VERL_ENTROPY] = Metric(aggregation=entropy.aggregation, value=entropy)
        if "rollout_log_probs" in data.keys():
            metrics.update(mismatch_metrics(model_output, data))
        return loss, metrics

    return ppo_loss


def install() -> None:
    """Wrap verl's ``ppo_loss`` (as its workers bind it) and its policy-loss lookup, in this process, once."""
    from verl.workers import engine_workers
    from verl.workers.utils import losses

    if getattr(engine_workers.ppo_loss, "agentrl_on_policy", False):
        return
    losses.get_policy_loss_fn = policy_loss_lookup(losses.get_policy_loss_fn)
    wrapped = ppo_loss_method(engine_workers.ppo_loss)
    wrapped.agentrl_on_policy = True  # type: ignore[attr-defined]
    engine_workers.ppo_loss = wrapped


install()
