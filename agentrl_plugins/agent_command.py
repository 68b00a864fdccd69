"""An agent program run as a process of its own: a user's harness, in any language, played through the gateway.

The process gets the episode's link where the ``openai`` client looks for it (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``), the model name in ``AGENTRL_MODEL`` and the time budget in ``AGENTRL_TIMEOUT_S``, and one JSON
object on stdin: ``{"task": {"id", "family", "split", "issue"}, "input": ...}`` (``input`` is what the
environment gives its programs). Its outcome is the JSON object on the last non-empty line of its stdout; the
environment turns it into what its verifier judges. Whatever it started is killed when it ends or its budget
runs out (it runs in a session of its own).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from agentrl_plugins.environment import AgentLink
from agentrl_plugins.errors import AgentRLError

STDERR_TAIL = 1500
"""How many characters of a failed program's stderr its error quotes."""


class AgentCommandError(AgentRLError):
    """The program failed: a non-zero exit, or no JSON object on its last line of stdout."""


class AgentCommandTimeout(AgentCommandError, TimeoutError):
    """The program did not finish within the episode's time budget (it was killed)."""


@dataclass(frozen=True)
class AgentCommand:
    """The command line of an agent program (``argv``, run in ``cwd``)."""

    argv: tuple[str, ...]
    cwd: str | None = None

    @classmethod
    def parse(cls, command: str | Sequence[str], cwd: str | None = None) -> AgentCommand:
        """A command from a shell-style string (split as a shell would, never run by one) or a list of words."""
        if not isinstance(command, (str, list, tuple)) or not all(isinstance(word, str) for word in command):
            raise TypeError(f"an agent command is a string or a list of strings, got {command!r}")
        argv = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not argv:
            raise ValueError("an agent command needs at least the program to run")
        return cls(argv, cwd)

    def run(self, link: AgentLink, task_input: Any) -> dict[str, Any]:
        """Play ``link.task``: the program's outcome object; raises :class:`AgentCommandError` when it fails."""
        task = link.task
        payload = json.dumps({"task": {"id": task.id, "family": task.family, "split": task.split,
                                       "issue": task.issue}, "input": task_input})
        env = {**os.environ, "OPENAI_BASE_URL": link.base_url, "OPENAI_API_KEY": link.api_key,
               "AGENTRL_MODEL": link.model, "AGENTRL_TIMEOUT_S": f"{link.timeout_s:g}"}
        try:
            process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, env=env, cwd=self.cwd,
                                       start_new_session=True)
        except OSError as error:
            raise AgentCommandError(f"agent command {shlex.join(self.argv)!r} could not start: {error}") from None
        try:
            stdout, stderr = process.communicate(payload, timeout=link.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_session(process.pid)
            process.communicate()
            raise AgentCommandTimeout(f"agent command {self.argv[0]!r} did not finish within {link.timeout_s:g} s "
                                      "and was killed") from None
        finally:
            _kill_session(process.pid)
        return self._outcome(process.returncode, stdout, stderr)

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


def _kill_session(pid: int) -> None:
    """SIGKILL every process left in the program's session (its process group: it is the session's leader)."""
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
