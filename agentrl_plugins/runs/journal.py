"""JSON-lines files that a kill at any moment leaves readable: each append is one ``write`` of a whole line, a
torn last line (a kill during its append) is left out on reading, and a rewrite is a new file renamed over the old.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from agentrl_plugins.errors import AgentRLError


def append_line(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` as one line, in a single ``write`` (so concurrent writers do not interleave lines)."""
    data = (json.dumps(row) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(descriptor, data):]
    except OSError as error:  # os.write names no file; the error should
        raise OSError(error.errno, error.strerror, str(path)) from error
    finally:
        os.close(descriptor)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The rows of ``path`` (none when it does not exist). A torn last line is left out; a line before it that
    is not a JSON object is an error naming the file and line."""
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line]
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except ValueError as error:
            if number == len(lines):
                break
            raise AgentRLError(f"{path}, line {number}: not a JSON line ({error})") from None
        if not isinstance(row, dict):
            raise AgentRLError(f"{path}, line {number}: not a JSON object")
        rows.append(row)
    return rows


def rewrite_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace ``path`` by ``rows``: written to a new file, then renamed over the old, so a kill meanwhile leaves
    the old file whole (and a stale new one the next rewrite replaces)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    os.replace(partial, path)
