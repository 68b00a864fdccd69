"""``AgentGRPOTrainer``: TRL's GRPOTrainer with the recipe's advantages, compact filtering and correction."""

from __future__ import annotations

import time
from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import use_adapter

from agentrl_plugins.algorithm import Advantages, RecipeAlgorithm
from agentrl_plugins.algorithms.aggregation import row_scale
from agentrl_plugins.algorithms.corrections import limited_fraction
from agentrl_plugins.algorithms.credit import TurnRecord, TurnRows
from agentrl_plugins.algorithms.mismatch import MismatchSums
from agentrl_plugins.batch import TrajectoryBatch
from agentrl_plugins.runs.figures import EpisodeCounts, episode_figures
from agentrl_plugins.segments import LaterSegments, with_later_segments

from agentrl_trl.config import loss_mapping
from agentrl_trl.rollout import EpisodeRollout, episode_reward
from agentrl_trl.segments import LEARNER_LOGPS, append_segments


class AgentGRPOTrainer(GRPOTrainer):
    """Replaces TRL's advantages with the core's; the rest of the GRPO step is TRL's own code.

    After TRL scores a batch: agent programs' later segments become rows of their own (carrying their episode's
    advantage), filtered trajectories lose every loss token (``tool_mask``), the
    recipe's estimator gives the advantages (one per trajectory, or per turn or token), and the correction's
    per-token weights and the aggregation's row scale are folded into a (B, T) advantage (exact for the
    clipped surrogate, since each weight is non-negative).
    """

    def __init__(self, *args: Any, algorithm: RecipeAlgorithm, rollout: EpisodeRollout, **kwargs: Any):
        self.algorithm = algorithm
        self.episode_rollout = rollout
        self.step_stats: dict[str, float | None] = {}
        self.mismatch = MismatchSums()
        self._mismatch_in_update = False
        self._scoring_loss: dict[str, Any] | None = None
        super().__init__(*args, reward_funcs=[episode_reward], rollout_func=rollout, **kwargs)

    def _measure_mismatch(self, output: dict[str, Any], learner: torch.Tensor, mask: torch.Tensor) -> None:
        """The mismatch sums now, where ``learner`` holds the learner's log-probs before the update (TRL's old
        policy or the correction's forward); otherwise from the update's own forward, which is on-policy exactly
        then (:meth:`_compute_loss`)."""
        uncorrected = self.algorithm.recipe.correction.name == "none"
        self._mismatch_in_update = output.get("old_per_token_logps") is None and uncorrected
        self.mismatch = MismatchSums() if self._mismatch_in_update else MismatchSums.of(
            learner, output["sampling_per_token_logps"], mask)

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        self._scoring_loss = inputs if self._mismatch_in_update else None
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._scoring_loss = None

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        inputs = self._scoring_loss
        if inputs is not None:
            self._scoring_loss = None
            mask = inputs["completion_mask"] * inputs["tool_mask"]
            self.mismatch += MismatchSums.of(result[0], inputs["sampling_per_token_logps"], mask)
        return result

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        started = time.monotonic()
        output = super()._generate_and_score_completions(inputs)
        trajectories = self.episode_rollout.trajectories
        batch = TrajectoryBatch.from_trajectories(trajectories, output["sampling_per_token_logps"].dtype)
        episodes = self.algorithm.advantages(batch.rewards, batch.group_ids, batch.terminations, batch)
        later = LaterSegments.of(trajectories, self.algorithm.level)
        advantages = self._append_segments(output, later, episodes) if later.rows else episodes
        if self.algorithm.distills:
            rows = [*trajectories, *later.rows]
            policy = output["completion_mask"] * output["tool_mask"]
            advantages = self.algorithm.distilled(advantages, TurnRows.of([TurnRecord.of(t) for t in rows], policy))
        valid = advantages.valid.to(output["tool_mask"].device)
        tool_mask = output["tool_mask"] * valid[:, None].to(output["tool_mask"].dtype)
        mask = output["completion_mask"] * tool_mask
        learner = self._learner_logps(output)
        correction = self.algorithm.correct(learner, output["sampling_per_token_logps"],
                                            mask.to(output["sampling_per_token_logps"].dtype))
        self._measure_mismatch(output, learner, mask)
        nonempty = int((mask.sum(-1) > 0).sum())
        scale = row_scale(loss_mapping(self.algorithm.recipe).scale, mask.size(0), nonempty)
        values = advantages.per_token(mask.size(1)).to(correction.weights.device, correction.weights.dtype)
        output["advantages"] = values * correction.weights * scale
        output["tool_mask"] = tool_mask
        output["num_items_in_batch"] = mask.sum()
        self.step_stats = {
            "train_reward": batch.rewards.mean().item(),
            "hacked_fraction": batch.hacked.float().mean().item(),
            "filtered_fraction": episodes.filtered_fraction,
            "is_capped_fraction": limited_fraction(correction.metrics),
            "is_masked_fraction": correction.metrics["masked_fraction"],
            "mismatch_kl": correction.metrics["mismatch_kl"],
            "policy_tokens": int(mask.sum().item()),
            **episode_figures([EpisodeCounts.of(t) for t in trajectories]),
            "rollout_seconds": time.monotonic() - started,
        }
        return output

    def _append_segments(self, output: dict[str, Any], later: LaterSegments, advantages: Advantages) -> Advantages:
        """Later segments as rows of the batch (:mod:`agentrl_trl.segments`), their learner log-probs computed as
        TRL computes its own rows'; the advantages of every row."""
        rows = append_segments(output, later.rows, self.processing_class.pad_token_id)
        for key in LEARNER_LOGPS:
            if key in output:
                output[key][rows] = self._segment_logps(output, rows, key)
        return with_later_segments(advantages, later.episode)

    def _segment_logps(self, output: dict[str, Any], rows: slice, key: str) -> torch.Tensor:
        """The policy's (``old_per_token_logps``) or the reference's log-probs of ``rows``' completions."""
        input_ids = torch.cat([output["prompt_ids"][rows], output["completion_ids"][rows]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"][rows], output["completion_mask"][rows]], dim=1)
        width = output["completion_ids"].size(1)
        batch_size = self.args.per_device_train_batch_size

        def logps(model: Any) -> torch.Tensor:
            return self._get_per_token_logps_and_entropies(model, input_ids, attention_mask, width,
                                                           batch_size=batch_size)[0]

        with torch.no_grad():
            if key == "old_per_token_logps":
                return logps(self.model)
            if self.ref_model is not None:
                return logps(self.ref_model)
            model = self.accelerator.unwrap_model(self.model)
            with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                return logps(self.model)

    def _learner_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """The trainer's log-probs of the sampled tokens at the sampling temperature, before this update."""
        if output.get("old_per_token_logps") is not None:
            return output["old_per_token_logps"]
        if self.algorithm.recipe.correction.name == "none":
            return output["sampling_per_token_logps"]
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, input_ids, attention_mask, output["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size)
        return logps
