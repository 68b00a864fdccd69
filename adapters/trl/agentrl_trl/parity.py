"""TRL's side of ``agentrl compare --parity``: the batch through the adapter's trainer and TRL's own loss.

``agent_trainer`` makes the real ``AgentGRPOTrainer`` (TRL's ``GRPOTrainer`` with the adapter's
``GRPOConfig`` mapping) around a small locally built model (its forward pass is replaced). Two seams stand in for what a
recorded batch replaces: TRL's generation and scoring step (``GRPOTrainer._generate_and_score_completions``)
returns the batch's tensors, and the model's forward pass (``_get_per_token_logps_and_entropies``)
returns the batch's learner log-probs and entropies. Everything between them is the adapter's and TRL's code:
the adapter's advantages, filtering, correction weights and row scale, then TRL's
``compute_loss``, whose logged metrics the recorder's ``step_figures`` turns into the step's figures.
TRL has no leave-one-out or correction hook, so those are the core's, injected.
Registered as the adapter's ``parity`` side (:mod:`agentrl_plugins.compare.side`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from agentrl_plugins.algorithm import Advantages, RecipeAlgorithm
from agentrl_plugins.algorithms.corrections import CorrectionResult
from agentrl_plugins.algorithms.credit import TurnRecord
from agentrl_plugins.algorithms.distillation import dense_advantages
from agentrl_plugins.compare.batch import ByDesign, ParityBatch, ParityResult
from agentrl_plugins.compare.side import gradient, mapping_rows, versions
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe import get_value
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.types import Trajectory, Verdict

from agentrl_trl.build import agent_trainer, hf_generator_factory
from agentrl_trl.config import describe
from agentrl_trl.recorder import step_figures

REJECTED_NOT_CLIPPED = ("TRL counts the clip only where its per-token advantage is nonzero, so a token the "
                        "correction rejects (weight 0) is never counted clipped; the core counts it by its "
                        "episode's advantage")
"""How TRL's ``clip_fraction`` differs under a correction that rejects tokens."""

CISPO_POSITIVE_ONLY = ("TRL's cispo counts a capped weight only where the advantage is positive; the core counts "
                       "every capped weight, as verl does")
"""How TRL's ``clip_fraction`` differs under the cispo loss."""

BY_DESIGN: dict[str, tuple[Any, str]] = {}
"""Recipe keys the adapter marks approximated -> the value TRL computes with instead, and why: none (the dual clip
is TRL's ``delta``, exact)."""


@dataclass
class RecordingAlgorithm:
    """The trainer's algorithm, keeping the advantages and correction it hands to TRL."""

    algorithm: RecipeAlgorithm
    advantages_made: list[Advantages] = field(default_factory=list)
    corrections_made: list[CorrectionResult] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        """Everything else the trainer reads (``recipe``, ``level``, ``distills``, ...) is the algorithm's."""
        if name == "algorithm":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.algorithm, name)

    def advantages(self, *args: Any) -> Advantages:
        self.advantages_made.append(self.algorithm.advantages(*args))
        return self.advantages_made[-1]

    def distilled(self, *args: Any) -> Advantages:
        self.advantages_made.append(self.algorithm.distilled(*args))
        return self.advantages_made[-1]

    def correct(self, *args: Any) -> CorrectionResult:
        self.corrections_made.append(self.algorithm.correct(*args))
        return self.corrections_made[-1]


def trajectories(batch: ParityBatch, recipe: Recipe) -> list[Trajectory]:
    """The batch as the trajectories the rollout would have kept, with their turns and the distillation signal
    the episode service would have set (token ids are irrelevant to the loss)."""
    records = batch.turn_records(recipe)
    rows = []
    for row in range(len(batch.rewards)):
        mask = batch.response_mask[row]
        verdict = Verdict(batch.rewards[row].item(), False, flags={"hacked": bool(batch.hacked[row])})
        rows.append(Trajectory(task_id=str(row), prompt_ids=[0], response_ids=[0] * mask.numel(),
                               response_mask=mask.long().tolist(), logprobs=batch.sampler_logprobs[row].tolist(),
                               turn_spans=list(batch.turn_spans[row]), termination=batch.terminations[row],
                               reward=verdict.reward, verdict=verdict, group_id=int(batch.group_ids[row]),
                               turns=list(batch.turns[row]),
                               token_advantages=token_advantages(records[row], mask.numel())))
    return rows


def token_advantages(record: TurnRecord, width: int) -> list[float]:
    """A row's distillation signal per response token, as the episode service sets it (empty without)."""
    if not record.token_values:
        return []
    like = torch.zeros(1, width, dtype=torch.float64)
    return dense_advantages([record.token_values], [record.spans], like)[0].tolist()


def scored(batch: ParityBatch) -> dict[str, Any]:
    """What TRL's generation and scoring step returns, for the recorded batch."""
    rows, width = batch.response_mask.shape
    return {"prompt_ids": torch.zeros(rows, 1, dtype=torch.long), "prompt_mask": torch.ones(rows, 1, dtype=torch.long),
            "completion_ids": torch.zeros(rows, width, dtype=torch.long),
            "completion_mask": torch.ones(rows, width, dtype=torch.long), "tool_mask": batch.response_mask.long(),
            "old_per_token_logps": batch.old_logprobs, "sampling_per_token_logps": batch.sampler_logprobs,
            "advantages": torch.zeros(rows, dtype=batch.rewards.dtype), "num_items_in_batch": batch.response_mask.sum()}


def by_design(recipe: Recipe, mapping: list[dict[str, Any]]) -> list[ByDesign]:
    """The ``BY_DESIGN`` differences that apply: keys the adapter marks approximated, set to another value."""
    approximated = {row["key"] for row in mapping if row["status"] == "approximated"}
    return [ByDesign({key: value}, cause) for key, (value, cause) in BY_DESIGN.items()
            if key in approximated and get_value(recipe, key) != value]


def compute(recipe: Recipe, batch: ParityBatch) -> ParityResult:
    from agentrl_plugins.local_models import build_model, byte_chat_tokenizer

    if batch.ranks > 1:
        raise RecipeError(f"TRL's side computes one trainer rank, not {batch.ranks}: agentrl's TRL adapter trains in "
                          "one process (several data-parallel ranks are verl's and OpenRLHF's)")

    tokenizer = byte_chat_tokenizer()
    recipe = dataclasses.replace(recipe, rollout=dataclasses.replace(recipe.rollout, engine="hf"))  # samples nothing
    with tempfile.TemporaryDirectory() as folder:
        run = RunDir(Path(folder) / "run")
        run.create(recipe, "trl")
        trainer = agent_trainer(recipe, build_model(tokenizer, seed=0), tokenizer, run_dir=run,
                                generator=hf_generator_factory(tokenizer))
        trainer.episode_rollout.service.close()
    recording = RecordingAlgorithm(trainer.algorithm)
    trainer.algorithm = recording
    trainer.episode_rollout.trajectories = trajectories(batch, recipe)
    original = GRPOTrainer._generate_and_score_completions
    GRPOTrainer._generate_and_score_completions = lambda self, inputs: scored(batch)
    try:
        output = trainer._generate_and_score_completions([])
    finally:
        GRPOTrainer._generate_and_score_completions = original
    logprobs = batch.logprobs.clone().requires_grad_()
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (logprobs, batch.entropies, None)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, output)
    mapping = mapping_rows(describe(recipe))
    rejects = recording.corrections_made[-1].metrics["masked_fraction"] > 0
    figures = step_figures(trainer._metrics["train"], trainer.step_stats, trainer.mismatch)
    return ParityResult("trl", recording.advantages_made[-1].values, recording.corrections_made[-1].weights,
                        loss.item(), gradient(loss, logprobs), versions("trl", "transformers", "agentrl-trl"),
                        mapping, by_design(recipe, mapping), figures,
                        figure_notes(recipe, rejects))


def figure_notes(recipe: Recipe, rejects: bool) -> dict[str, str]:
    """Where TRL's figures are defined otherwise than the core's, for this recipe and batch."""
    if recipe.loss.policy == "cispo":
        return {"clip_fraction": CISPO_POSITIVE_ONLY}
    return {"clip_fraction": REJECTED_NOT_CLIPPED} if rejects else {}
