"""The parity exchange format: one JSON file in, one JSON file out per framework.

The core writes the input; ``python -m agentrl_plugins.compare.side FRAMEWORK IN OUT`` runs in the
framework's environment and writes the output. Both are JSON objects; float64 values are
written by Python's ``json`` (shortest round-trip repr), so nothing is lost in transit.
B is the number of trajectories, T the padded response length.

Input (``format`` = ``agentrl-parity-input``, ``version`` 4)::

    recipe: the resolved recipe (``recipe_to_dict``; ``build_recipe`` reads it back)
    batch:
      seed: int                 seed of the recording (episodes and log-probs)
      ranks: int                data-parallel trainer ranks the framework splits the batch over; row i goes
                                to rank i mod ranks, so every group spans every rank (``rank_rows``)
      rewards: [B]              verifier reward per trajectory
      group_ids: [B]            int; groups are consecutive runs of the recipe's group size
      terminations: [B]         termination reason per trajectory (compact filtering reads it)
      hacked: [B]               bool, the verifier's hacked flag
      response_mask: [B][T]     1 = a token the policy sampled, 0 = observation or padding
      sampler_logprobs: [B][T]  the sampler's log-probs (0 off the mask)
      old_logprobs: [B][T]      the learner's log-probs before the update (the injected mismatch
                                is old_logprobs - sampler_logprobs)
      logprobs: [B][T]          the learner's log-probs being differentiated (ratio numerator)
      entropies: [B][T]         the learner's per-token entropy (what its forward pass returns beside
                                the log-probs; 0 off the mask)
      turn_spans: [B][turns][2] each turn's [start, end) in the response
      turn_states: [B][turns]   int|null, the anchor state of each turn, numbered (equal numbers: equal
                                states; turn-level estimators group by them)
      turn_rewards: [B][turns]  float|null, the environment's own reward for each turn
      teacher_logprobs: [B][T]  a distillation teacher's log-probs of the response tokens (optional; 0 off the
                                mask): a recipe with distillation.teacher gets its signal from them

Output (``format`` = ``agentrl-parity-output``, ``version`` 4)::

    framework: str; versions: {distribution: version}
    advantages: [B] or [B][T]   per trajectory (or per token, for a turn- or token-level estimator), in
                                the core's convention (a row scale an adapter folds into the advantages
                                for the loss denominator is divided out)
    weights: [B][T]             per-token correction weight on each loss token (0 elsewhere)
    loss: float                 the scalar the framework would backpropagate (over several ranks: the mean of
                                the ranks' losses, as the gradient all-reduce averages them)
    gradient: [B][T]            d loss / d logprobs (over several ranks: what the all-reduce leaves)
    mapping: [{key, value, setting, status, note}]   the adapter's rows for the compared keys
    by_design: [{overrides: {recipe key: value}, cause: str}]  what the framework computes
                                instead, as recipe overrides (the core checks it against them)
    figures: {name: float|null} the step's ``metrics.jsonl`` figures as the adapter's recorder makes
                                them from the framework's own outputs (``FIGURES``; null: not reported)
    figure_notes: {name: str}   figures the framework defines otherwise for this recipe, and how
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from agentrl_plugins.algorithms.credit import TurnRecord
from agentrl_plugins.algorithms.distillation import reverse_kl_signal
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import build_recipe, recipe_to_dict
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.types import TurnOutcome

INPUT_FORMAT = "agentrl-parity-input"
OUTPUT_FORMAT = "agentrl-parity-output"
VERSION = 4
COMPARED_KEYS = ("advantage.estimator", "advantage.masked_in_baseline", "loss.aggregation", "loss.clip_low",
                 "loss.clip_high", "loss.clip_c", "correction.name", "filtering.compact")
"""The recipe keys a parity run exercises; each adapter reports how it maps them."""


class ParityFormatError(AgentRLError):
    """A parity file that is not in the documented format."""


def _tensor(values: Any, dtype: torch.dtype = torch.float64) -> Tensor:
    return torch.tensor(values, dtype=dtype)


@dataclass(frozen=True)
class ParityBatch:
    """One recorded step: per-trajectory rewards and groups, per-token masks and log-probs (float64)."""

    seed: int
    rewards: Tensor
    group_ids: Tensor
    terminations: tuple[str, ...]
    hacked: Tensor
    response_mask: Tensor
    sampler_logprobs: Tensor
    old_logprobs: Tensor
    logprobs: Tensor
    entropies: Tensor
    turns: tuple[tuple[TurnOutcome, ...], ...] = ()
    turn_spans: tuple[tuple[tuple[int, int], ...], ...] = ()
    ranks: int = 1
    teacher_logprobs: Tensor | None = None

    def turn_records(self, recipe: Recipe, offset: int = 0) -> list[TurnRecord]:
        """Each row's turn record as an adapter carries it (spans moved by ``offset``), with the distillation
        signal of the recipe's ``[distillation]`` from the teacher's log-probs where it names a teacher."""
        settings = recipe.distillation
        if settings.enabled and self.teacher_logprobs is None:
            raise AgentRLError(f"{recipe.name}: distillation.teacher is set, and this parity batch holds no "
                               "teacher_logprobs")
        records = []
        for row, (turns, spans) in enumerate(zip(self.turns, self.turn_spans, strict=True)):
            values: tuple[float, ...] = ()
            if settings.enabled and self.teacher_logprobs is not None:
                mask = self.response_mask[row].long().tolist()
                signal = reverse_kl_signal(self.sampler_logprobs[row].tolist(), self.teacher_logprobs[row].tolist(),
                                           mask, settings.coef)
                values = tuple(signal[index] for start, end in spans for index in range(start, end))
            records.append(TurnRecord(turns, tuple((start + offset, end + offset) for start, end in spans), values))
        return records

    def rank_rows(self) -> list[Tensor]:
        """The rows each data-parallel rank trains on: row i on rank i mod ``ranks``, so that every group's members
        land on different ranks (the case where a group statistic computed per rank would go wrong)."""
        rows = torch.arange(len(self.rewards))
        return [rows[rank::self.ranks] for rank in range(self.ranks)]

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "ranks": self.ranks, "rewards": self.rewards.tolist(),
                "group_ids": self.group_ids.tolist(), "terminations": list(self.terminations),
                "hacked": self.hacked.tolist(),
                "response_mask": self.response_mask.tolist(), "sampler_logprobs": self.sampler_logprobs.tolist(),
                "old_logprobs": self.old_logprobs.tolist(), "logprobs": self.logprobs.tolist(),
                "entropies": self.entropies.tolist(), "turn_spans": [list(map(list, s)) for s in self.turn_spans],
                "turn_states": [[t.state for t in turns] for turns in self.turns],
                "turn_rewards": [[t.reward for t in turns] for turns in self.turns],
                **({"teacher_logprobs": self.teacher_logprobs.tolist()} if self.teacher_logprobs is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParityBatch:
        turns = tuple(tuple(TurnOutcome(state, reward=reward) for state, reward in zip(states, rewards, strict=True))
                      for states, rewards in zip(data["turn_states"], data["turn_rewards"], strict=True))
        return cls(seed=int(data["seed"]), ranks=int(data["ranks"]), rewards=_tensor(data["rewards"]),
                   group_ids=_tensor(data["group_ids"], torch.long), terminations=tuple(data["terminations"]),
                   hacked=_tensor(data["hacked"], torch.bool), response_mask=_tensor(data["response_mask"]),
                   sampler_logprobs=_tensor(data["sampler_logprobs"]), old_logprobs=_tensor(data["old_logprobs"]),
                   logprobs=_tensor(data["logprobs"]), entropies=_tensor(data["entropies"]), turns=turns,
                   turn_spans=tuple(tuple((int(a), int(b)) for a, b in spans) for spans in data["turn_spans"]),
                   teacher_logprobs=_tensor(data["teacher_logprobs"]) if "teacher_logprobs" in data else None)


@dataclass(frozen=True)
class ByDesign:
    """A difference a framework has by design: what it computes instead, as recipe overrides, and why."""

    overrides: dict[str, Any]
    cause: str


@dataclass(frozen=True)
class ParityResult:
    """One framework's numbers for a parity batch (see the module docstring for each field)."""

    framework: str
    advantages: Tensor
    weights: Tensor
    loss: float
    gradient: Tensor
    versions: dict[str, str] = field(default_factory=dict)
    mapping: list[dict[str, Any]] = field(default_factory=list)
    by_design: list[ByDesign] = field(default_factory=list)
    figures: dict[str, float | None] = field(default_factory=dict)
    figure_notes: dict[str, str] = field(default_factory=dict)

    @property
    def gradient_norm(self) -> float:
        return self.gradient.norm().item()

    def to_dict(self) -> dict[str, Any]:
        return {"format": OUTPUT_FORMAT, "version": VERSION, "framework": self.framework, "versions": self.versions,
                "advantages": self.advantages.tolist(), "weights": self.weights.tolist(), "loss": self.loss,
                "gradient": self.gradient.tolist(), "mapping": self.mapping,
                "by_design": [{"overrides": d.overrides, "cause": d.cause} for d in self.by_design],
                "figures": self.figures, "figure_notes": self.figure_notes}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParityResult:
        _check_format(data, OUTPUT_FORMAT)
        return cls(framework=data["framework"], advantages=_tensor(data["advantages"]),
                   weights=_tensor(data["weights"]), loss=float(data["loss"]), gradient=_tensor(data["gradient"]),
                   versions=dict(data["versions"]), mapping=list(data["mapping"]),
                   by_design=[ByDesign(dict(d["overrides"]), d["cause"]) for d in data["by_design"]],
                   figures=dict(data["figures"]), figure_notes=dict(data["figure_notes"]))


def _check_format(data: Any, expected: str) -> None:
    if not isinstance(data, dict) or data.get("format") != expected or data.get("version") != VERSION:
        found = (data.get("format"), data.get("version")) if isinstance(data, dict) else type(data).__name__
        raise ParityFormatError(f"expected a {expected!r} version {VERSION} file, found {found}")


def write_input(path: Path, recipe: Recipe, batch: ParityBatch) -> Path:
    path.write_text(json.dumps({"format": INPUT_FORMAT, "version": VERSION, "recipe": recipe_to_dict(recipe),
                                "batch": batch.to_dict()}))
    return path


def read_input(path: Path) -> tuple[Recipe, ParityBatch]:
    data = json.loads(Path(path).read_text())
    _check_format(data, INPUT_FORMAT)
    return build_recipe(data["recipe"], origin=str(path)), ParityBatch.from_dict(data["batch"])


def write_result(path: Path, result: ParityResult) -> Path:
    path.write_text(json.dumps(result.to_dict()))
    return path


def read_result(path: Path) -> ParityResult:
    return ParityResult.from_dict(json.loads(Path(path).read_text()))
