"""The experiment loggers ``agentrl run --report-to`` can name, checked before any training starts."""

from __future__ import annotations

import importlib.util
from typing import Sequence

from agentrl_plugins.errors import AgentRLError, UnknownNameError

LOGGERS = {
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", "pip install wandb (offline: WANDB_MODE=offline)"),
    "trackio": ("trackio", "pip install trackio"),
}
"""Logger name: the module it needs and how to install it."""


def parse_loggers(text: str) -> tuple[str, ...]:
    """``"tensorboard,wandb"`` as names; ``"none"`` (or nothing) is no logger. Unknown names list the known."""
    names = tuple(name.strip() for name in text.split(",") if name.strip() and name.strip() != "none")
    for name in names:
        if name not in LOGGERS:
            raise UnknownNameError("logger", name, [*LOGGERS, "none"], "Name several with commas.")
    return names


def check_loggers(names: Sequence[str]) -> None:
    """Each logger's module is importable here (the framework's environment), or an error says how to install it."""
    missing = [name for name in names if importlib.util.find_spec(LOGGERS[name][0]) is None]
    if missing:
        hints = "; ".join(f"{name}: {LOGGERS[name][1]}" for name in missing)
        raise AgentRLError(f"--report-to names {', '.join(missing)}, not installed in this environment. "
                           f"Install it into the framework's environment ({hints}), or leave it out.")

