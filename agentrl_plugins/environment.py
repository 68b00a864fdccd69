"""What an environment plugin provides: a suite of tasks and one session per episode."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from agentrl_plugins.errors import UnknownNameError
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


def build_environment(settings: Any, plugin_manager: Any = None) -> EnvironmentSuite:
    """The environment a recipe's ``[environment]`` section names, made by its factory with ``options``."""
    from agentrl_plugins.plugins import get_plugin_manager

    component = (plugin_manager or get_plugin_manager()).get("environment", settings.name)
    options = settings.options
    parameters = inspect.signature(component.factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    for key in options:
        if not takes_any and key not in parameters:
            raise UnknownNameError(f"option of environment {component.name!r}", key,
                                   [name for name in parameters if name != "self"],
                                   "Set options under [environment.options] in the recipe.")
    return component.factory(**options)
