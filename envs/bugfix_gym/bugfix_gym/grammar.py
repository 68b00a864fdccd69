"""The one call grammar of the gym: ``<tool>NAME [ARG]</tool>``, used everywhere."""

from __future__ import annotations

import re

OPEN, CLOSE = "<tool>", "</tool>"
TOOLS = ("read", "test", "edit", "submit")
_CALL = re.compile(r"<tool>\s*(\w+)(?:\s+(\w+))?\s*</tool>")
MALFORMED_MESSAGE = f"ERROR: expected {OPEN}tool [arg]{CLOSE}"


def parse_call(text: str) -> tuple[str, str | None] | None:
    """``'<tool>edit swap_minmax</tool>'`` -> ``('edit', 'swap_minmax')``; anything else -> None."""
    match = _CALL.fullmatch(text.strip())
    return None if match is None else (match.group(1), match.group(2))


def format_call(tool: str, arg: str | None = None) -> str:
    return f"{OPEN}{tool}{' ' + arg if arg else ''}{CLOSE}"
