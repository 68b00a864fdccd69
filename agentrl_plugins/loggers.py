"""The experiment loggers ``agentrl run --report-to`` can name, checked before any training starts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
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
    """Each logger's module is importable here (the framework's environment), or an error says how to install it;
    W&B has credentials or needs none, or an error says what to set (W&B would otherwise stop the run to ask)."""
    missing = [name for name in names if importlib.util.find_spec(LOGGERS[name][0]) is None]
    if missing:
        hints = "; ".join(f"{name}: {LOGGERS[name][1]}" for name in missing)
        raise AgentRLError(f"--report-to names {', '.join(missing)}, not installed in this environment. "
                           f"Install it into the framework's environment ({hints}), or leave it out.")
    if "wandb" in names and not wandb_credentials():
        raise AgentRLError("--report-to wandb: W&B has no API key here. Set WANDB_API_KEY (or run `wandb login`), "
                           "or WANDB_MODE=offline to keep the run on disk")


def wandb_credentials() -> bool:
    """Whether W&B can log without asking: a key in ``WANDB_API_KEY`` or ``~/.netrc``, or a mode that needs none."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace")

