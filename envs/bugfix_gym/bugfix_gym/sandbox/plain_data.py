"""The pool's side of a candidate's return values: decode the tagged plain data, compare with exact types.

:func:`bugfix_gym.sandbox.worker.encode` is the other side. Nothing here runs candidate code: decoding builds
only built-in values, and the comparison looks at ``type`` before any ``==``.
"""

from __future__ import annotations

from bugfix_gym.sandbox.worker import MAX_DEPTH

_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def decode(node: object, depth: int = 0) -> object:
    """The value a worker encoded; ValueError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if node is None or type(node) in (bool, str):
        return node
    if type(node) is not dict or len(node) != 1:
        raise ValueError(f"not a tagged value: {type(node).__name__}")
    ((tag, body),) = node.items()
    if tag == "int" and type(body) is str:
        return int(body)
    if tag == "float" and type(body) is str:
        return float(body)
    if tag == "complex" and type(body) is list and len(body) == 2 and all(type(part) is str for part in body):
        return complex(float(body[0]), float(body[1]))
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag in _SEQUENCES and type(body) is list:
        return _SEQUENCES[tag](decode(item, depth + 1) for item in body)
    if tag == "dict" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
        return {decode(key, depth + 1): decode(item, depth + 1) for key, item in body}
    raise ValueError(f"not a tagged value: {tag!r}")


def same(got: object, expected: object) -> bool:
    """``got == expected`` with exact types at every level (``True`` is not ``1``, ``1.0`` is not ``1``)."""
    if type(got) is not type(expected):
        return False
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same(got[key], item) for key, item in expected.items())
    if isinstance(got, float) and isinstance(expected, float):
        return got == expected or (got != got and expected != expected)  # NaN is NaN
    return bool(got == expected)
