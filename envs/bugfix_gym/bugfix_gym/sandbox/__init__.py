"""Run untrusted candidate functions against test cases: verdicts decided outside the candidate, every run confined.

The pool (:mod:`.pool`) hands each run to a warm worker (:mod:`.worker`) that lives in a bubblewrap view
(:mod:`.view`); return values come back as plain data (:mod:`.plain_data`) and are compared here. Linux only.
"""

from bugfix_gym.sandbox.pool import (
    LAYERS,
    CaseResult,
    RunResult,
    Sandbox,
    SandboxUnavailableError,
    TestCase,
    run_in_fork,
    run_in_process,
)

__all__ = ["LAYERS", "CaseResult", "RunResult", "Sandbox", "SandboxUnavailableError", "TestCase", "run_in_fork",
           "run_in_process"]
