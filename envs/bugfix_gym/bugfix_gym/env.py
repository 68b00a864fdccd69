"""The BugFix environment: tasks from the families, one session per episode, tools read/test/edit/submit.

In free-form mode the agent may also ``write`` the whole source (:mod:`bugfix_gym.grammar`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agentrl_plugins.environment import ScriptedEpisode, StepResult
from agentrl_plugins.errors import AgentRLError, UnknownNameError
from agentrl_plugins.types import REDUNDANT_SIGNAL, Task

from bugfix_gym.families import FAMILIES
from bugfix_gym.family import SPLITS, Family
from bugfix_gym.grammar import FENCE, MALFORMED_MESSAGE, WRITE, WriteError, format_call, parse_call, parse_write
from bugfix_gym.sandbox import RunResult, Sandbox, TestCase
from bugfix_gym.variants import renamed_variants as renamed_variants_of

SYSTEM_PROMPT = (
    "You fix one bug in a Python function. Reply with exactly one tool call per message: "
    f"{format_call('read')} shows the source, {format_call('test')} runs the public tests, "
    f"{format_call('edit', 'OP')} applies one edit op from the task's menu, {format_call('submit')} ends the episode."
)
FREE_FORM_SYSTEM_PROMPT = (
    f"{SYSTEM_PROMPT} {format_call(WRITE)} followed by the whole new source in a {FENCE} fenced block "
    "replaces the function with your code."
)
TestRunner = Callable[[str, str, Sequence[TestCase]], RunResult]
SANDBOX_ATTEMPTS = 3  # a transient result (a busy or unavailable sandbox) is retried up to this many runs in all


class SandboxBusyError(AgentRLError):
    """No sandbox worker could run the code in any attempt: the episode has no verdict (an environment error),
    never a failing one."""


@dataclass(frozen=True)
class Submission:
    """What a verifier judges: the final source and whether the agent submitted it."""

    family: Family
    source: str
    submitted: bool
    run_tests: TestRunner


def format_results(function: str, result: RunResult) -> str:
    """One ``PASS``/``FAIL`` line per test, as the ``test`` tool shows them."""
    if result.status == "load_error":
        return f"FAIL load error: {result.detail}"
    return "\n".join(
        f"{'PASS' if r.passed else 'FAIL'} {function}({', '.join(map(repr, r.case.args))}) -> {r.got}"
        for r in result.results
    )


def task_prompt(family: Family, free_form: bool = False) -> str:
    """The issue and the edit menu; in free-form mode also how to write the function."""
    prompt = f"{family.issue}\nEdit ops: {', '.join(family.op_names)}"
    if free_form:
        prompt += f"\nOr write the function: {format_call(WRITE)} then its source in a {FENCE} block"
    return prompt


def _unknown_call(tool: str, arg: str | None) -> str:
    return f"ERROR: unknown tool or op: {tool} {arg}"


PASS_SIGNAL = "public_pass_fraction"
"""The turn signal ``BugFixGym(turn_signals=True)`` emits: the share of public tests the source passes."""


class BugFixSession:
    """One episode on one family; ``step`` never raises on bad policy text.

    Each step's state key is the exact source after the action (``initial_state``: the buggy source), and its
    :data:`~agentrl_plugins.types.REDUNDANT_SIGNAL` is 1 for a read or test of a source already read or tested
    as it is, or an edit that leaves the source unchanged. With ``turn_signals`` a step also measures
    :data:`PASS_SIGNAL` (one sandbox run per distinct source, cached), and ``initial_signals`` the buggy
    source's.
    """

    def __init__(self, family: Family, run_tests: TestRunner, free_form: bool = False, turn_signals: bool = False):
        self.family = family
        self.source = family.buggy
        self.initial_state = family.buggy
        self.submitted = False
        self.free_form = free_form
        self.turn_signals = turn_signals
        self.prompt = task_prompt(family, free_form)
        self._run_tests = run_tests
        self._seen: set[tuple[str, str]] = set()

    @property
    def initial_signals(self) -> dict[str, float]:
        return {PASS_SIGNAL: self._public_pass_fraction()} if self.turn_signals else {}

    def step(self, action: str) -> StepResult:
        before = self.source
        result = self._act(action)
        signals = {REDUNDANT_SIGNAL: float(self._redundant(action, before))}
        if self.turn_signals:
            signals[PASS_SIGNAL] = self._public_pass_fraction()
        return dataclasses.replace(result, state=self.source, signals=signals)

    def _redundant(self, action: str, before: str) -> bool:
        """A read or test of a source already read or tested as it is, or an edit that changed nothing."""
        call = parse_call(action) if parse_write(action) is None else None
        if call is None or call[0] not in ("read", "test", "edit"):
            return False
        if call[0] == "edit":
            return self.family.op(call[1]) is not None and self.source == before
        seen = (call[0], self.source) in self._seen
        self._seen.add((call[0], self.source))
        return seen

    def _public_pass_fraction(self) -> float:
        result = self._run_tests(self.source, self.family.function, self.family.public_tests)
        return sum(r.passed for r in result.results) / max(len(self.family.public_tests), 1)

    def _act(self, action: str) -> StepResult:
        if self.submitted:
            return StepResult("ERROR: the episode is over", True)
        write = parse_write(action)
        if write is not None:
            return self._write(write)
        call = parse_call(action)
        if call is None:
            return StepResult(MALFORMED_MESSAGE)
        tool, arg = call
        if tool == "read":
            return StepResult(self.source)
        if tool == "test":
            result = self._run_tests(self.source, self.family.function, self.family.public_tests)
            return StepResult(format_results(self.family.function, result))
        op = self.family.op(arg) if tool == "edit" else None
        if op is not None:
            self.source = op.apply(self.source)
            return StepResult(f"edited with {arg}")
        if tool == "submit":
            self.submitted = True
            return StepResult("submitted", True)
        return StepResult(_unknown_call(tool, arg))

    def _write(self, write: str | WriteError) -> StepResult:
        """Replace the source with the written code; outside free-form mode ``write`` is an unknown tool."""
        if not self.free_form:
            return StepResult(_unknown_call(WRITE, None))
        if isinstance(write, WriteError):
            return StepResult(write.message)
        self.source = write
        return StepResult("wrote the new source")

    def outcome(self) -> Submission:
        return Submission(self.family, self.source, self.submitted, self._run_tests)

    def close(self) -> None:
        """Sessions hold no resources of their own; the suite owns the sandbox."""


class BugFixGym:
    """The suite of BugFix tasks; owns a pool of sandbox workers shared by all sessions.

    ``renamed_variants`` adds that many renamed variants of every train family
    to the train split (:mod:`bugfix_gym.variants`), drawn with ``variant_seed``.
    ``free_form`` adds the ``write`` tool (the agent's own code) to the prompts and the sessions.
    ``strict_sandbox`` (on with ``free_form`` unless set) refuses to run code where a sandbox layer is missing.
    ``turn_signals`` makes every step measure the share of public tests passing (:data:`PASS_SIGNAL`), the
    potential of potential-based shaping; state keys (the source) come with every step regardless.
    ``sandbox_wait_s`` is how long one attempt waits for a free sandbox worker (:data:`SANDBOX_ATTEMPTS` in all).
    """

    def __init__(self, families: Sequence[Family] = FAMILIES, workers: int = 2, timeout_s: float = 2.0,
                 memory_mb: int = 256, cache_size: int = 4096, renamed_variants: int = 0, variant_seed: int = 0,
                 free_form: bool = False, strict_sandbox: bool | None = None, turn_signals: bool = False,
                 sandbox_wait_s: float = 30.0):
        if renamed_variants < 0:
            raise ValueError(f"renamed_variants must be >= 0, got {renamed_variants}")
        if not isinstance(free_form, bool):
            raise TypeError(f"free_form must be true or false, got {free_form!r}")
        if not isinstance(turn_signals, bool):
            raise TypeError(f"turn_signals must be true or false, got {turn_signals!r}")
        self.free_form, self.turn_signals = free_form, turn_signals
        self.system_prompt = FREE_FORM_SYSTEM_PROMPT if free_form else SYSTEM_PROMPT
        train = [family for family in families if family.split == "train"]
        families = list(families) + renamed_variants_of(train, renamed_variants, variant_seed)
        self.families = {family.name: family for family in families}
        strict = free_form if strict_sandbox is None else strict_sandbox
        self._sandbox_options = {"workers": workers, "timeout_s": timeout_s, "memory_mb": memory_mb, "strict": strict,
                                 "acquire_timeout_s": sandbox_wait_s}
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, str], RunResult] = OrderedDict()
        self._cache_size = cache_size

    def family(self, name: str) -> Family:
        if name not in self.families:
            raise UnknownNameError("BugFix family", name, self.families)
        return self.families[name]

    def tasks(self, split: str | None = None) -> list[Task]:
        if split is not None and split not in SPLITS:
            raise UnknownNameError("split", split, SPLITS)
        return [Task(f.name, f.name, f.split, task_prompt(f, self.free_form), f.buggy)
                for f in self.families.values() if split is None or f.split == split]

    def start(self, task: Task) -> BugFixSession:
        return BugFixSession(self.family(task.family), self.run_tests, self.free_form, self.turn_signals)

    def parity_episodes(self, group_size: int, max_turns: int, generator: Any) -> list[ScriptedEpisode]:
        """The parity batch's scripted episodes (:mod:`bugfix_gym.parity`)."""
        from bugfix_gym.parity import parity_episodes

        return parity_episodes(self, group_size, max_turns, generator)

    def run_tests(self, source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
        """Run ``cases`` in the sandbox; identical requests are answered from a cache (never a transient result).

        A transient result is run again, :data:`SANDBOX_ATTEMPTS` times in all: a timeout that stays transient is
        the code's own (it waited every time); no free worker in any attempt raises :class:`SandboxBusyError`."""
        key = (source, function, repr(tuple(cases)))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            if self._sandbox is None:
                self._sandbox = Sandbox(**self._sandbox_options)
            sandbox = self._sandbox
        for _ in range(SANDBOX_ATTEMPTS):
            result = sandbox.run(source, function, cases)
            if not result.transient:
                break
        else:
            if result.status == "unavailable":
                raise SandboxBusyError(f"the sandbox could not run the code in {SANDBOX_ATTEMPTS} attempts "
                                       f"({result.detail}); this episode has no verdict")
            return result
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None
