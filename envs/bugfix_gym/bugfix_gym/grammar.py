"""The one call grammar of the gym: ``<tool>NAME [ARG]</tool>``, used everywhere.

In free-form mode (``BugFixGym(free_form=True)``) one more call replaces the whole source: the
message is ``<tool>write</tool>``, then a fenced block, and nothing after it::

    <tool>write</tool>
    ```python
    def f(x):
        return x
    ```

The opening fence is ``` plus an optional language tag on a line of its own; the block closes at the
message's last line, which must be exactly ```, so the source may itself contain fences. The source
is everything in between, at most ``MAX_WRITE_CHARS`` characters. A malformed write (no block, empty
source, no closing line, too long) parses to a ``WriteError`` holding its observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = "<tool>", "</tool>"
TOOLS = ("read", "test", "edit", "submit")
_CALL = re.compile(r"<tool>\s*(\w+)(?:\s+(\w+))?\s*</tool>")
MALFORMED_MESSAGE = f"ERROR: expected {OPEN}tool [arg]{CLOSE}"

WRITE, FENCE = "write", "```"
MAX_WRITE_CHARS = 8000
_WRITE_HEAD = re.compile(r"<tool>\s*write\s*</tool>")
_OPENING_FENCE = re.compile(r"```\w*[ \t]*")
WRITE_NO_CODE = f"ERROR: write needs the new source in a {FENCE} fenced block after {OPEN}{WRITE}{CLOSE}"
WRITE_UNCLOSED = f"ERROR: the code block of write is not closed: end the message with a line {FENCE}"
WRITE_TOO_LONG = f"ERROR: the source of write is over {MAX_WRITE_CHARS} characters"


@dataclass(frozen=True)
class WriteError:
    """A malformed ``write`` call; ``message`` is the observation the agent gets."""

    message: str


def parse_call(text: str) -> tuple[str, str | None] | None:
    """``'<tool>edit swap_minmax</tool>'`` -> ``('edit', 'swap_minmax')``; anything else -> None."""
    match = _CALL.fullmatch(text.strip())
    return None if match is None else (match.group(1), match.group(2))


def format_call(tool: str, arg: str | None = None) -> str:
    return f"{OPEN}{tool}{' ' + arg if arg else ''}{CLOSE}"


def parse_write(text: str) -> str | WriteError | None:
    """The source a write call carries, a ``WriteError`` if it is malformed, None if ``text`` is no write call."""
    text = text.strip()
    head = _WRITE_HEAD.match(text)
    if head is None:
        return None
    opening, newline, rest = text[head.end():].lstrip().partition("\n")
    if not _OPENING_FENCE.fullmatch(opening):
        return WriteError(WRITE_NO_CODE)
    if not newline or not (rest == FENCE or rest.endswith("\n" + FENCE)):
        return WriteError(WRITE_UNCLOSED)
    source = rest[: -len(FENCE)]
    if not source.strip():
        return WriteError(WRITE_NO_CODE)
    if len(source) > MAX_WRITE_CHARS:
        return WriteError(WRITE_TOO_LONG)
    return source


def format_write(source: str) -> str:
    """The write call that replaces the source with ``source`` (``parse_write`` gives it back, newline-ended)."""
    body = source if source.endswith("\n") else source + "\n"
    return f"{format_call(WRITE)}\n{FENCE}python\n{body}{FENCE}"
