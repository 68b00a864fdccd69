"""What an environment plugin provides: a suite of tasks and one session per episode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from agentrl_plugins.types import Task, Verdict


@dataclass(frozen=True)
class StepResult:
    """The environment's answer to one policy message."""

    observation: str
    done: bool = False


class EpisodeSession(Protocol):
    """The state of one episode; ``step`` never raises on bad policy text."""

    prompt: str

    def step(self, action: str) -> StepResult: ...

    def outcome(self) -> Any:
        """What a verifier judges once the episode is over."""

    def close(self) -> None: ...


class EnvironmentSuite(Protocol):
    """A named collection of tasks with a shared system prompt (tools and grammar)."""

    system_prompt: str

    def tasks(self, split: str | None = None) -> Sequence[Task]: ...

    def start(self, task: Task) -> EpisodeSession: ...


class VerifierFn(Protocol):
    def __call__(self, outcome: Any) -> Verdict: ...
