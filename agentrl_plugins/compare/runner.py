"""Running each framework's side of a comparison in that framework's own environment.

The frameworks cannot share one environment, so each side runs as
``PYTHON -m agentrl_plugins.compare.side FRAMEWORK IN OUT`` (see :mod:`agentrl_plugins.compare.batch`),
where PYTHON is found as :mod:`agentrl_plugins.frameworks` says (``AGENTRL_PYTHON_<FRAMEWORK>``,
``$AGENTRL_VENVS``, the ``agentrl.toml`` configuration file, or this interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from agentrl_plugins.compare.batch import ParityResult, read_result
from agentrl_plugins.compare.side import NO_ADAPTER_EXIT, REFUSED_EXIT
from agentrl_plugins.errors import AgentRLError, UnknownNameError
from agentrl_plugins.frameworks import (
    PYTHON_VARIABLE,
    FrameworkEnv,
    adapter_distribution,
    install_hint,
    known_frameworks,
    python_of,
)

STDERR_LINES = 25
__all__ = ["FrameworkEnv", "FrameworkEnvError", "check_frameworks", "find_env", "run_side"]


class FrameworkEnvError(AgentRLError):
    """A framework's environment is missing, or its side of the comparison failed."""


def check_frameworks(names: list[str]) -> list[str]:
    """``names`` if each is a known framework (unknown ones raise with close matches); no repeats."""
    known = known_frameworks()
    for name in names:
        if name not in known:
            raise UnknownNameError("framework", name, known,
                                   f"A framework is known when its adapter is installed here, it has a "
                                   f"[frameworks.{name}] table in agentrl.toml, or "
                                   f"{PYTHON_VARIABLE.format(name.upper())} "
                                   "names its Python.")
    if len(set(names)) != len(names) or not names:
        raise AgentRLError(f"name each framework once, e.g. --frameworks trl,verl,openrlhf (got {names})")
    return names


def find_env(framework: str) -> FrameworkEnv:
    """The Python of ``framework``'s environment; a clear error naming it and how to build it when missing."""
    check_frameworks([framework])
    env = python_of(framework)
    variable = PYTHON_VARIABLE.format(framework.upper())
    if env is None or not env.python.exists():
        where = f"{env.python} (from {env.found_by}) does not exist" if env else "nothing names its Python"
        raise FrameworkEnvError(f"no {framework} environment: {where}. To make one, {install_hint(framework)}; "
                                f"or set {variable} to the Python of an environment where {framework} and its "
                                "adapter are installed.")
    return env


def run_side(env: FrameworkEnv, input_path: Path, output_path: Path) -> ParityResult:
    """Run ``env``'s side on ``input_path``; its result, or an error with the end of its stderr."""
    command = [str(env.python), "-m", "agentrl_plugins.compare.side", env.framework, str(input_path), str(output_path)]
    started = time.monotonic()
    print(f"parity: {env.framework} in {env.python} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-STDERR_LINES:])
        if done.returncode == NO_ADAPTER_EXIT or "No module named 'agentrl_plugins'" in done.stderr:
            raise FrameworkEnvError(f"{env.python} has no {adapter_distribution(env.framework)} ({tail}); "
                                    f"{install_hint(env.framework)}")
        if done.returncode == REFUSED_EXIT:
            raise FrameworkEnvError(f"{env.framework} refuses the recipe: {done.stderr.strip().splitlines()[-1]}")
        raise FrameworkEnvError(f"{env.framework}'s side failed ({' '.join(command[:4])}, exit "
                                f"{done.returncode}):\n{tail}")
    print(f"parity: {env.framework} done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return read_result(output_path)
