"""One framework's side of a parity run, and what every adapter's side shares (mapping rows, the gradient).

An adapter registers ``Adapter(..., parity=loader)``; ``loader()`` returns
``compute(recipe, batch) -> ParityResult`` built on its framework's own code. The core runs
``PYTHON -m agentrl_plugins.compare.side FRAMEWORK IN OUT`` in that framework's environment (see
:mod:`agentrl_plugins.compare.batch`), which finds the adapter by name in that environment's registry.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch import Tensor

from agentrl_plugins.adapter import FrameworkConfig
from agentrl_plugins.compare.batch import COMPARED_KEYS, ParityBatch, ParityResult, read_input, write_result
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe_schema import Recipe

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

Compute = Callable[[Recipe, ParityBatch], ParityResult]


def mapping_rows(config: FrameworkConfig) -> list[dict[str, Any]]:
    """The adapter's mapping rows of the keys a parity run exercises, as plain data."""
    return [dataclasses.asdict(row) for row in config.mappings if row.key in COMPARED_KEYS]


def versions(*distributions: str) -> dict[str, str]:
    """Installed versions of ``distributions`` (and torch)."""
    found = {}
    for name in ("torch", *distributions):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def gradient(loss: Tensor, logprobs: Tensor) -> Tensor:
    """d loss / d logprobs, detached."""
    (grad,) = torch.autograd.grad(loss, logprobs)
    return grad.detach()


NO_ADAPTER_EXIT = 3
REFUSED_EXIT = 4
"""The exit status of a side whose adapter refuses the recipe (its message, one line, is the last of stderr)."""
"""The side's exit status when this environment has no adapter (or no parity side) for the framework."""


def parity_compute(framework: str, plugin_manager: PluginManager | None = None) -> Compute:
    """The registered adapter's parity side; :class:`SideUnavailable` when this environment has none."""
    from agentrl_plugins.plugins import get_plugin_manager

    registry = (plugin_manager or get_plugin_manager()).registry("adapter")
    if framework not in registry:
        raise SideUnavailable(f"no adapter named {framework!r} is registered in this environment "
                              f"({sys.executable}; registered: {', '.join(registry.names()) or 'none'})")
    record = registry.get(framework)
    if record.parity is None:
        raise SideUnavailable(f"adapter {framework!r} ({registry.entry(framework).distribution}) has no parity side")
    return record.parity()


class SideUnavailable(Exception):
    """This environment cannot compute the framework's side."""


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agentrl_plugins.compare.side FRAMEWORK IN OUT``: read the batch, compute, write the result."""
    parser = argparse.ArgumentParser(description="One framework's side of `agentrl compare --parity`.")
    parser.add_argument("framework", help="the adapter's registered name")
    parser.add_argument("input", type=Path, help="parity input JSON (agentrl_plugins.compare.batch)")
    parser.add_argument("output", type=Path, help="where to write this framework's parity output JSON")
    args = parser.parse_args(argv)
    try:
        compute = parity_compute(args.framework)
    except SideUnavailable as error:
        print(error, file=sys.stderr)
        raise SystemExit(NO_ADAPTER_EXIT) from None
    torch.set_num_threads(1)
    recipe, batch = read_input(args.input)
    try:
        result = compute(recipe, batch)
    except RecipeError as error:
        print(str(error).replace("\n", " "), file=sys.stderr)
        raise SystemExit(REFUSED_EXIT) from None
    write_result(args.output, result)


if __name__ == "__main__":
    main()
