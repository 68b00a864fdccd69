"""Running each framework's side of a comparison in that framework's own environment.

The frameworks cannot share one environment, so each side runs as
``PYTHON -m agentrl_<framework>.parity IN OUT`` (see :mod:`agentrl_plugins.compare.batch`).
PYTHON is found by configuration, first match wins:

1. ``AGENTRL_PYTHON_<FRAMEWORK>`` (e.g. ``AGENTRL_PYTHON_VERL=/opt/verl/bin/python``);
2. ``$AGENTRL_VENVS/<framework>/bin/python``;
3. ``.venvs/<framework>/bin/python`` in the repository (as ``./scripts/build_<framework>_env.sh`` builds it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from agentrl_plugins.adapter import FRAMEWORK_DISTRIBUTIONS
from agentrl_plugins.compare.batch import ParityResult, read_result
from agentrl_plugins.errors import AgentRLError, UnknownNameError

PYTHON_VARIABLE = "AGENTRL_PYTHON_{}"
VENVS_VARIABLE = "AGENTRL_VENVS"
REPOSITORY = Path(__file__).resolve().parents[2]
STDERR_LINES = 25


class FrameworkEnvError(AgentRLError):
    """A framework's environment is missing, or its side of the comparison failed."""


@dataclass(frozen=True)
class FrameworkEnv:
    """Where a framework's Python is and which setting named it."""

    framework: str
    python: Path
    found_by: str


def check_frameworks(names: list[str]) -> list[str]:
    """``names`` if each is a known framework (unknown ones raise with close matches); no repeats."""
    for name in names:
        if name not in FRAMEWORK_DISTRIBUTIONS:
            raise UnknownNameError("framework", name, FRAMEWORK_DISTRIBUTIONS)
    if len(set(names)) != len(names) or not names:
        raise AgentRLError(f"name each framework once, e.g. --frameworks trl,verl,openrlhf (got {names})")
    return names


def find_env(framework: str) -> FrameworkEnv:
    """The Python of ``framework``'s environment; a clear error naming it and how to build it when missing."""
    check_frameworks([framework])
    variable = PYTHON_VARIABLE.format(framework.upper())
    if os.environ.get(variable):
        env = FrameworkEnv(framework, Path(os.environ[variable]), variable)
    elif os.environ.get(VENVS_VARIABLE):
        env = FrameworkEnv(framework, Path(os.environ[VENVS_VARIABLE]) / framework / "bin" / "python",
                           VENVS_VARIABLE)
    else:
        env = FrameworkEnv(framework, REPOSITORY / ".venvs" / framework / "bin" / "python", "the repository's .venvs")
    if not env.python.exists():
        raise FrameworkEnvError(
            f"no {framework} environment: {env.python} (from {env.found_by}) does not exist. Build it with "
            f"./scripts/build_{framework}_env.sh, or set {variable} to the Python of an environment where "
            f"{framework} and {FRAMEWORK_DISTRIBUTIONS[framework]} are installed.")
    return env


def run_side(env: FrameworkEnv, input_path: Path, output_path: Path) -> ParityResult:
    """Run ``env``'s parity module on ``input_path``; its result, or an error with the end of its stderr."""
    module = f"agentrl_{env.framework}.parity"
    started = time.monotonic()
    print(f"parity: {env.framework} in {env.python} ...", file=sys.stderr, flush=True)
    done = subprocess.run([str(env.python), "-m", module, str(input_path), str(output_path)], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-STDERR_LINES:])
        if f"No module named '{module.split('.')[0]}'" in done.stderr:
            raise FrameworkEnvError(f"{env.python} has no {FRAMEWORK_DISTRIBUTIONS[env.framework]}: install it "
                                    f"there (./scripts/build_{env.framework}_env.sh does)")
        raise FrameworkEnvError(f"{env.framework}'s side failed ({env.python} -m {module}, exit "
                                f"{done.returncode}):\n{tail}")
    print(f"parity: {env.framework} done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return read_result(output_path)
