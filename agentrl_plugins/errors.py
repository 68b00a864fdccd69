"""Errors that say what went wrong and what to do instead."""

from __future__ import annotations

import difflib
from typing import Iterable


def close_matches(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates that look most like ``name``, best first."""
    return difflib.get_close_matches(name, sorted(candidates), n=n, cutoff=0.5)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A ' Did you mean ...?' suffix, or '' when nothing is close."""
    matches = close_matches(name, candidates)
    return f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


class AgentRLError(Exception):
    """Base class of every error the project raises on purpose."""


class UnknownNameError(AgentRLError, LookupError):
    """A component, recipe key or option name that does not exist."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = ""):
        self.kind, self.name, self.known = kind, name, sorted(known)
        listing = ", ".join(self.known) if self.known else "none registered"
        message = f"unknown {kind} {name!r}.{did_you_mean(name, self.known)} Known: {listing}."
        super().__init__(message + (f" {hint}" if hint else ""))


class DuplicateNameError(AgentRLError):
    """Two plugins registered the same name for the same kind."""


class ModelUnavailableError(AgentRLError):
    """A model that is registered or named but cannot be made available here; the message says how."""


class RecipeError(AgentRLError, ValueError):
    """A recipe file or override that does not fit the schema."""


class MissingAdapterError(AgentRLError):
    """A framework was asked for whose adapter distribution is not installed."""
