"""What an environment plugin provides: a suite of tasks and one session per episode."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Mapping, Protocol, Sequence

from agentrl_plugins.errors import RecipeError, UnknownNameError
from agentrl_plugins.types import Task, Verdict

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager


@dataclass(frozen=True)
class StepResult:
    """The environment's answer to one policy message. For turn-level credit it may also carry the key of the
    state the action led to (hashable, equal for equal states), the turn's own reward and named measurements
    of the new state (``signals``); the episode runner keeps them per turn (:class:`~agentrl_plugins.types.
    TurnOutcome`)."""

    observation: str
    done: bool = False
    state: Hashable | None = None
    reward: float | None = None
    signals: Mapping[str, float] = field(default_factory=dict)


class EpisodeSession(Protocol):
    """The state of one episode; ``step`` never raises on bad policy text.

    A session whose steps carry state keys may also have ``initial_state``, the key of the state the
    episode starts from (the anchor of its first turn), and ``initial_signals``, that state's signals (what a
    potential-based turn reward needs for the first turn).
    """

    prompt: str

    def step(self, action: str) -> StepResult: ...

    def outcome(self) -> Any:
        """What a verifier judges once the episode is over."""

    def close(self) -> None: ...


class EnvironmentSuite(Protocol):
    """A named collection of tasks with a shared system prompt (tools and grammar).

    A suite that holds resources (workers, sandboxes) may also define ``close()``; runs call it through
    :func:`close_environment` when they end.
    """

    system_prompt: str

    def tasks(self, split: str | None = None) -> Sequence[Task]: ...

    def start(self, task: Task) -> EpisodeSession: ...


@dataclass(frozen=True)
class AgentLink:
    """What an agent program is given for one episode: an OpenAI base URL and API key (the episode's), the model
    name to ask for, the task, and the episode's time budget. ``notes``: what the program's runner says about the
    episode (output it cut, ...), kept in the episode's messages."""

    base_url: str
    api_key: str
    model: str
    task: Task
    timeout_s: float
    notes: list[str] = field(default_factory=list, compare=False, repr=False)


class AgentProgramSuite(Protocol):
    """An environment kind whose episodes an agent program plays: its own loop over the ``openai`` client, its own
    prompts and tools. The gateway records every model call token by token (:mod:`agentrl_plugins.gateway`).

    ``run_agent`` plays ``link.task`` through ``link`` and returns what the recipe's verifier judges; it may raise
    (the episode ends as ``error``). A suite that holds resources may define ``close()``.
    """

    def tasks(self, split: str | None = None) -> Sequence[Task]: ...

    def run_agent(self, link: AgentLink) -> Any: ...


def is_agent_program(env: Any) -> bool:
    """Whether ``env`` is an :class:`AgentProgramSuite` (its episodes go through the gateway)."""
    return callable(getattr(env, "run_agent", None))


@dataclass(frozen=True)
class ScriptedEpisode:
    """One episode of the parity batch as the environment scripts it: its task, group and the policy's messages.

    ``max_context_tokens``, when set, tightens the context budget of this episode (to record a truncated one).
    """

    task: Task
    group: int
    messages: Sequence[str]
    max_context_tokens: int | None = None


class ParityScripts(Protocol):
    """An environment that can script the parity batch of ``agentrl compare --parity`` (optional)."""

    def parity_episodes(self, group_size: int, max_turns: int, generator: Any) -> list[ScriptedEpisode]:
        """Groups of ``group_size`` scripted episodes with mixed outcomes: solved, hacked, out of turns,
        truncated, and one group whose rewards are all equal; ``generator`` is a seeded ``torch.Generator``."""


class VerifierFn(Protocol):
    def __call__(self, outcome: Any) -> Verdict: ...


def close_environment(env: EnvironmentSuite) -> None:
    """Release the suite's resources, if it holds any (``close`` is optional)."""
    close = getattr(env, "close", None)
    if callable(close):
        close()


def build_environment(settings: Any, plugin_manager: PluginManager | None = None) -> EnvironmentSuite:
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
    try:
        return component.factory(**options)
    except (TypeError, ValueError) as error:
        raise RecipeError(f"environment {component.name!r} refused its options {options}: {error}") from error


def plays_agent_programs(settings: Any, plugin_manager: PluginManager | None = None) -> bool:
    """Whether the environment ``settings`` names is an agent program suite (built to ask, then closed): a framework
    whose rows are one per episode must then make room for later segments."""
    env = build_environment(settings, plugin_manager)
    try:
        return is_agent_program(env)
    finally:
        close_environment(env)
