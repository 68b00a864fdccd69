"""The pool's side of a candidate's return values: compare the tagged plain data with exact types, and show it.

:func:`bugfix_gym.sandbox.worker.encode` is the other side. Nothing here runs candidate code or hashes a
candidate's numbers: a value is compared through its canonical text (exact types at every level; sets and dict
keys as sorted texts, so neither ``{True, 2.0}`` passes for ``{1, 2}`` nor can 5,000 ints of one hash stall the
pool), and shown as the candidate's own ``repr`` would show it, from the tagged value in its order.
"""

from __future__ import annotations

import json
from typing import Any

from bugfix_gym.sandbox.worker import MAX_DEPTH, REPR_LIMIT, encode

_SEQUENCES = ("list", "tuple", "set", "frozenset")


def same(got: object, expected: object) -> bool:
    """Whether the tagged value ``got`` is ``expected`` (``True`` is not ``1``, ``1.0`` is not ``1``, NaN is NaN);
    ValueError where ``got`` is not a tagged value."""
    return canonical(got) == canonical(encode(expected))


def canonical(node: object, depth: int = 0) -> str:
    """A text two tagged values share if and only if they are the same plain data; ValueError for anything else."""
    tag, body = _parts(node, depth)
    if tag in ("none", "bool", "str"):
        return json.dumps(body)
    if tag == "int":
        return f"i{int(body)}"  # ValueError past the int digit limit
    if tag == "float":
        return f"f{_float(body)}"
    if tag == "complex":
        return f"c{_float(body[0])},{_float(body[1])}"
    if tag == "bytes":
        return f"b{bytes.fromhex(body).hex()}"
    if tag in ("list", "tuple"):
        return f"{tag}[{','.join(canonical(item, depth + 1) for item in body)}]"
    if tag in ("set", "frozenset"):
        return f"{tag}[{','.join(sorted({canonical(item, depth + 1) for item in body}))}]"
    pairs = {canonical(key, depth + 1): canonical(item, depth + 1) for key, item in body}  # the last of a key wins
    return f"dict[{','.join(f'{key}:{pairs[key]}' for key in sorted(pairs))}]"


def shown(node: object) -> str:
    """The tagged value as ``repr`` shows it, cut to REPR_LIMIT characters; ValueError for anything else."""
    text = _shown(node, 0)
    return text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT] + "..."


def _shown(node: object, depth: int) -> str:
    tag, body = _parts(node, depth)
    if tag in ("none", "bool", "str"):
        return repr(body)
    if tag == "int":
        return repr(int(body))
    if tag == "float":
        return repr(float(body))
    if tag == "bytes":
        return repr(bytes.fromhex(body))
    if tag == "complex":
        return repr(complex(float(body[0]), float(body[1])))
    if tag == "dict":
        return "{" + ", ".join(f"{_shown(key, depth + 1)}: {_shown(item, depth + 1)}" for key, item in body) + "}"
    items = ", ".join(_shown(item, depth + 1) for item in body)
    if tag == "list":
        return f"[{items}]"
    if tag == "tuple":
        return f"({items},)" if len(body) == 1 else f"({items})"
    if not body:
        return f"{tag}()"
    return f"{{{items}}}" if tag == "set" else f"frozenset({{{items}}})"


def _float(text: str) -> str:
    value = float(text)
    return repr(value + 0.0)  # -0.0 == 0.0, as == has it


def _parts(node: object, depth: int) -> tuple[str, Any]:
    """The tag and body of one tagged value, checked; ValueError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if node is None:
        return "none", None
    if type(node) in (bool, str):
        return type(node).__name__, node
    if type(node) is not dict or len(node) != 1:
        raise ValueError(f"not a tagged value: {type(node).__name__}")
    ((tag, body),) = node.items()
    if tag in ("int", "float", "bytes") and type(body) is str:
        return tag, body
    if tag == "complex" and type(body) is list and len(body) == 2 and all(type(part) is str for part in body):
        return tag, body
    if tag in _SEQUENCES and type(body) is list:
        return tag, body
    if tag == "dict" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
        return tag, body
    raise ValueError(f"not a tagged value: {tag!r}")
