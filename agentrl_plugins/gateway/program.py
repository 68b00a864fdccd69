"""Playing one episode with an agent program: a gateway session, the program on a thread of its own, the
recorded tokens and the verifier's judgement as a :class:`~agentrl_plugins.types.Trajectory`."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from agentrl_plugins.agent_command import AgentCommandError, AgentCommandTimeout
from agentrl_plugins.environment import AgentLink, AgentProgramSuite, VerifierFn
from agentrl_plugins.episode import Generate
from agentrl_plugins.gateway.recorder import Segment
from agentrl_plugins.gateway.server import Gateway
from agentrl_plugins.gateway.session import GatewaySession
from agentrl_plugins.types import Limits, Sampling, Task, Trajectory, TurnOutcome, Verdict

GRACE_S = 5.0
"""How long past the episode's time budget a program may take to return before the episode ends as timeout."""


def _run_program(suite: AgentProgramSuite, link: AgentLink, loop: asyncio.AbstractEventLoop,
                 done: asyncio.Future) -> None:
    """The program's thread: its outcome or exception handed to ``done`` on ``loop``."""
    try:
        result, error = suite.run_agent(link), None
    except BaseException as raised:  # the program's own failure, whatever it is, is the episode's outcome
        result, error = None, raised

    def settle() -> None:
        if not done.done():
            if error is None:
                done.set_result(result)
            else:
                done.set_exception(error)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the trainer's loop closed while a hung program was still running
        pass


def _trajectory(segment: Segment, task: Task, group_id: int, policy_version: int) -> Trajectory:
    return Trajectory(task_id=task.id, prompt_ids=segment.prompt_ids, response_ids=segment.response_ids,
                      response_mask=segment.mask, logprobs=segment.logprobs, turn_spans=segment.turn_spans,
                      termination="", group_id=group_id, policy_version=policy_version, family=task.family,
                      split=task.split, turns=[TurnOutcome() for _ in segment.turn_spans])


def _termination(session: GatewaySession, hung: bool, error: str | None) -> str:
    if session.termination not in (None, "closed"):
        return session.termination or "error"
    if hung:
        return "timeout"
    if error is not None or session.requests == 0:
        return "error"
    return "submitted"


async def play_agent_program(gateway: Gateway, suite: AgentProgramSuite, task: Task, generate: Generate,
                             tokenizer: Any, limits: Limits, sampling: Sampling, *, verifier: VerifierFn,
                             group_id: int = 0, policy_version: int = 0, hooks: Any = None) -> Trajectory:
    """One episode of ``task`` played by ``suite``'s agent program through ``gateway``, sampled by ``generate``.

    A program that raises ends the episode as ``error``, one that never calls the model as ``error`` with no
    tokens, one that does not return within the time budget (and ``GRACE_S``; a process, within the budget) as
    ``timeout`` (its later calls are refused); a limit the gateway enforces (``max_turns``, ``max_context``,
    ``timeout``) is the termination whatever the program does next. The verifier judges what the program returned.
    """
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    session = gateway.open_session(generate, tokenizer, limits, sampling, loop=loop)
    link = AgentLink(gateway.base_url, session.key, gateway.model_name, task, limits.timeout_s)
    done: asyncio.Future = loop.create_future()
    threading.Thread(target=_run_program, args=(suite, link, loop, done), name=f"agent {session.key}",
                     daemon=True).start()
    outcome: Any = None
    error: str | None = None
    hung = False
    try:
        outcome = await asyncio.wait_for(asyncio.shield(done), limits.timeout_s + GRACE_S)
    except AgentCommandTimeout as raised:  # a program run as a process, killed at its budget
        hung, error = True, str(raised)
    except TimeoutError:
        hung = True
        error = f"the agent program did not return within {limits.timeout_s + GRACE_S:g} s"
    except AgentCommandError as raised:  # a process's failure, already said in full
        error = str(raised)
    except Exception as raised:
        error = f"the agent program raised {raised!r}"
    finally:
        gateway.close_session(session.key)
    if error is None and session.requests == 0:
        error = "the agent program never called the model"
    termination = _termination(session, hung, error)
    verdict: Verdict | None = None
    if error is None:
        try:
            verdict = await asyncio.to_thread(verifier, outcome)
        except Exception as raised:
            termination, error = "error", f"the verifier raised {raised!r}"
    recorder = session.recorder
    segments = recorder.segments or [Segment([])]
    trajectory = _trajectory(segments[0], task, group_id, policy_version)
    trajectory.segments = [_trajectory(segment, task, group_id, policy_version) for segment in segments[1:]]
    for part in (trajectory, *trajectory.segments):
        part.termination = termination
        part.verdict = verdict
        part.reward = verdict.reward if verdict is not None else 0.0
    trajectory.messages = (list(recorder.messages) + [{"role": "note", "content": note} for note in link.notes]
                           + ([{"role": "error", "content": error}] if error else []))
    trajectory.seconds = time.monotonic() - started
    if hooks is not None:
        hooks.agentrl_episode_end(trajectory=trajectory)
    return trajectory
