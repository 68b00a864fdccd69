"""The episode log of a verl run: one JSON line per episode, written by the agent loop, read by the recorder.

The agent loop appends to ``episodes.jsonl`` in the run folder of the recipe file
verl's config names (``+agentrl.recipe``). ``weights_version`` is the trainer step whose weights the
rollout server held: training episodes of step k ran on version k - 1, and the
held-out evaluation after step k on version k.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from agentrl_plugins.runs.journal import append_line, read_lines, rewrite_lines

EPISODES_FILE = "episodes.jsonl"


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode as verl trained on it: its outcome, its tokens, and its loss mask before filtering."""

    split: str
    weights_version: int
    task_id: str
    termination: str
    reward: float
    passed: bool
    hacked: bool
    filtered: bool
    prompt_ids: list[int]
    response_ids: list[int]
    policy_mask: list[int]
    logprobs: list[float]
    redundant: int = 0
    """Its turns the environment flagged redundant."""
    drift: int = 0
    """Its segments after the first (an agent program's conversation that stopped extending its tokens)."""
    started: float = 0.0
    ended: float = 0.0
    """When it was played (wall clock, seconds since the epoch; 0 in logs written before they were kept)."""
    later_policy_tokens: int = 0
    """The policy tokens sampled in its later segments."""
    later_trained: bool = True
    """Whether verl trains its later segments, as rows beside it (a trajectory-level estimator does)."""
    teacher_gap: float = 0.0
    teacher_tokens: int = 0
    teacher_seconds: float = 0.0
    """A distillation teacher's gap, summed over the policy tokens it scored, their count and its forwards' share
    of time (0 without one)."""

    @property
    def policy_tokens(self) -> int:
        """Tokens in the loss, its later segments' included: none when the episode is compact-filtered."""
        if self.filtered:
            return 0
        return self.sampled_policy_tokens if self.later_trained else sum(self.policy_mask)

    @property
    def sampled_policy_tokens(self) -> int:
        """The policy tokens it sampled, in every segment, filtered or not."""
        return sum(self.policy_mask) + self.later_policy_tokens


def played_seconds(episodes: list[EpisodeRecord]) -> float | None:
    """Wall time from the first episode's start to the last one's end; None without timed episodes."""
    timed = [e for e in episodes if e.ended > 0]
    return max(e.ended for e in timed) - min(e.started for e in timed) if timed else None


def append_episode(path: Path, record: EpisodeRecord) -> None:
    """Append one line (a single write, so concurrent agent-loop workers do not interleave lines)."""
    append_line(path, asdict(record))


def truncate_episodes(path: Path, last_step: int) -> None:
    """Keep only what a resume from step ``last_step``'s checkpoint does not run again (verl evaluates again
    before it continues, so the evaluation on ``last_step``'s weights goes too); atomically."""
    rewrite_lines(path, [asdict(e) for e in read_episodes(path) if e.weights_version < last_step])


def read_episodes(path: Path) -> list[EpisodeRecord]:
    """The log's episodes; a torn last line (a kill during its append) is left out."""
    names = [f.name for f in fields(EpisodeRecord)]
    return [EpisodeRecord(**{name: row[name] for name in names if name in row}) for row in read_lines(path)]
