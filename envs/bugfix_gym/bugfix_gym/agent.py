"""The BugFix gym played by an agent program: a plain loop over the ``openai`` client and the gym's tools, or a
user's own program run as a process.

This is what a user's own agent looks like to the project: it gets a base URL, an API key and a task, keeps its
own conversation, calls ``chat.completions``, runs the tool the model asked for, and returns the submission. It
plays exactly the episode runner's loop, so through the gateway it yields the runner's trajectories token for
token. A reply or refusal carrying the ``X-Agentrl-Episode-End`` header means the gateway ended the episode (a
limit): the program stops and returns what it has.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from agentrl_plugins.agent_command import AgentCommand, AgentCommandError, outcome_field
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.gateway import EPISODE_END_HEADER

from bugfix_gym.env import BugFixGym, Submission
from bugfix_gym.family import Family
from bugfix_gym.grammar import MAX_WRITE_CHARS


@functools.lru_cache(maxsize=8)
def _client(base_url: str) -> Any:
    """One ``openai`` client per gateway: a new client builds an SSL context (about 20 ms); ``with_options`` per
    episode shares its connection pool."""
    import openai

    return openai.OpenAI(base_url=base_url, api_key="per-episode", max_retries=0)


def windowed(messages: list[dict[str, Any]], keep_turns: int | None) -> list[dict[str, Any]]:
    """The system prompt, the task, and the last ``keep_turns`` exchanges of ``messages`` (all of them for None):
    the sliding context window agents keep when a history outgrows them."""
    if keep_turns is None or len(messages) <= 2 + 2 * keep_turns:
        return messages
    return messages[:2] + messages[len(messages) - 2 * keep_turns:] if keep_turns else messages[:2]


def play(link: AgentLink, gym: BugFixGym, keep_turns: int | None = None) -> Submission:
    """Play ``link.task`` with the model behind ``link``; the submission (or the source as it stands) is returned.
    With ``keep_turns`` the model sees only the last that many exchanges (:func:`windowed`)."""
    import openai

    client = _client(link.base_url).with_options(api_key=link.api_key, timeout=link.timeout_s)
    session = gym.start(link.task)
    messages: list[dict[str, Any]] = [{"role": "system", "content": gym.system_prompt},
                                      {"role": "user", "content": session.prompt}]
    try:
        while True:
            try:
                raw = client.chat.completions.with_raw_response.create(model=link.model,
                                                                       messages=windowed(messages, keep_turns))
            except openai.APIStatusError as error:
                if EPISODE_END_HEADER in error.response.headers:
                    break
                raise
            reply = raw.parse().choices[0].message.content or ""
            if EPISODE_END_HEADER in raw.headers:
                break
            result = session.step(reply)
            if result.done:
                break
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": result.observation}]
        return session.outcome()
    finally:
        session.close()


def program_input(family: Family) -> dict[str, Any]:
    """What a program run as a process is given for a task (``input`` on its stdin, beside the task and its issue):
    the function's name and buggy source, its public tests, and the source each edit op of the menu would make."""
    return {"function": family.function, "source": family.buggy,
            "public_tests": [{"args": list(case.args), "expected": case.expected} for case in family.public_tests],
            "edits": {op.name: op.apply(family.buggy) for op in family.ops}}


def program_submission(family: Family, outcome: dict[str, Any], run_tests: Any) -> Submission:
    """A process's outcome, ``{"source": str, "submitted": bool (default true)}``, as the verifier's submission."""
    source = outcome_field(outcome, "source", str)
    if len(source) > MAX_WRITE_CHARS:
        raise AgentCommandError(f"the agent program's source has {len(source)} characters; at most "
                                f"{MAX_WRITE_CHARS} are judged")
    return Submission(family, source, outcome_field(outcome, "submitted", bool, True), run_tests)


class BugFixAgentGym(BugFixGym):
    """The BugFix gym played by an agent program through the gateway (environment ``bugfix_agent``): the shipped
    loop (:func:`play`), or with ``command`` the user's own program run as a process
    (:mod:`agentrl_plugins.agent_command`; given :func:`program_input`, answering as :func:`program_submission`
    reads), confined (the gym's own package, its hidden tests, out of its view) unless ``confine`` is false.
    ``keep_turns``: the shipped loop shows the model only its last that many exchanges, so from the turn
    after, each conversation no longer extends the tokens sampled before (a new segment each turn: drift). Takes
    the options of :class:`~bugfix_gym.env.BugFixGym` too."""

    def __init__(self, command: str | list[str] | None = None, keep_turns: int | None = None, confine: bool = True,
                 **options: Any):
        missing = [name for name in ("openai", "starlette", "uvicorn") if importlib.util.find_spec(name) is None]
        if missing:
            raise ImportError(f"environment 'bugfix_agent' needs {', '.join(missing)}: "
                              "pip install 'agentrl-bugfix-gym[agent]'")
        if keep_turns is not None and (isinstance(keep_turns, bool) or not isinstance(keep_turns, int)
                                       or keep_turns < 0):
            raise ValueError(f"keep_turns must be a whole number of exchanges >= 0, got {keep_turns!r}")
        if keep_turns is not None and command is not None:
            raise ValueError("keep_turns sets the shipped loop's context window; a command's program keeps its own")
        self.command = None if command is None else AgentCommand.parse(command, confine=confine,
                                                                        hidden=[str(Path(__file__).parent)])
        if self.command is not None:
            self.command.check()  # a program that cannot run confined stops the run here, with what is missing
        self.keep_turns = keep_turns
        super().__init__(**options)

    def run_agent(self, link: AgentLink) -> Submission:
        if self.command is None:
            return play(link, self, self.keep_turns)
        family = self.family(link.task.family)
        return program_submission(family, self.command.run(link, program_input(family)), self.run_tests)
