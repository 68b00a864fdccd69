"""What every framework's parity module shares: the command line, the mapping rows and the gradient.

An adapter's ``parity`` module defines ``compute(recipe, batch) -> ParityResult`` with its
framework's own code and ends with ``main(compute)``; the core runs it as
``python -m agentrl_<framework>.parity IN OUT`` (see :mod:`agentrl_plugins.compare.batch`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from agentrl_plugins.adapter import FrameworkConfig
from agentrl_plugins.compare.batch import COMPARED_KEYS, ParityBatch, ParityResult, read_input, write_result
from agentrl_plugins.recipe_schema import Recipe

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


def main(compute: Compute, argv: Sequence[str] | None = None) -> None:
    """``python -m agentrl_<framework>.parity IN OUT``: read the batch, compute, write the result."""
    parser = argparse.ArgumentParser(description="One framework's side of `agentrl compare --parity`.")
    parser.add_argument("input", type=Path, help="parity input JSON (agentrl_plugins.compare.batch)")
    parser.add_argument("output", type=Path, help="where to write this framework's parity output JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    recipe, batch = read_input(args.input)
    write_result(args.output, compute(recipe, batch))
