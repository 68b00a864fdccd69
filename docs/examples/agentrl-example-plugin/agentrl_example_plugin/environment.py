"""Arithmetic with a calculator: the agent may reply ``calc A OP B`` (any number of times), then ``answer N``."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from agentrl_plugins.environment import StepResult
from agentrl_plugins.types import Task

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
PROBLEMS = {"train": ["12 * 7", "45 + 38", "90 - 17"], "held_out": ["23 * 4"]}
CALC = re.compile(r"calc (-?\d+) ([-+*]) (-?\d+)")
ANSWER = re.compile(r"answer (-?\d+)")


def solve(problem: str) -> int:
    a, op, b = problem.split()
    return OPS[op](int(a), int(b))


@dataclass(frozen=True)
class Answer:
    """What the verifier judges: the right result and the agent's answer (None if it never answered)."""

    expected: int
    given: int | None


class ArithmeticSession:
    """One episode; ``step`` answers bad text with an error observation and never raises."""

    def __init__(self, problem: str):
        self.prompt = f"What is {problem}?"
        self.expected = solve(problem)
        self.given: int | None = None

    def step(self, action: str) -> StepResult:
        text = action.strip()
        if calc := CALC.fullmatch(text):
            return StepResult(str(solve(" ".join(calc.groups()))))
        if answer := ANSWER.fullmatch(text):
            self.given = int(answer.group(1))
            return StepResult("answered", done=True)
        return StepResult("ERROR: reply 'calc A OP B' or 'answer N'")

    def outcome(self) -> Answer:
        return Answer(self.expected, self.given)

    def close(self) -> None:
        """Nothing to release: a session holds no process or file."""


class ArithmeticEnv:
    """The task suite: a system prompt (tools and grammar), tasks by split, one session per episode."""

    system_prompt = "Solve the problem. Reply 'calc A OP B' to use the calculator, 'answer N' to finish."

    def tasks(self, split: str | None = None) -> list[Task]:
        return [Task(f"{name}-{i}", "arithmetic", name, f"What is {problem}?", problem)
                for name, problems in PROBLEMS.items() if split in (None, name)
                for i, problem in enumerate(problems)]

    def start(self, task: Task) -> ArithmeticSession:
        return ArithmeticSession(task.initial_state)
