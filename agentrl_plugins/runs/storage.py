"""A write that failed for want of room or permission, said as such: the folder, why, and the space left."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentrl_plugins.errors import AgentRLError

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}
_TORCH_SHORT_WRITE = ("unexpected pos", "PytorchStreamWriter failed writing", "iostream error")


def storage_error(error: BaseException, folder: Path | None = None) -> AgentRLError | None:
    """The clear error for ``error`` (or what caused it) if it is a failed write: a full disk, a read-only file
    system, no permission, or torch's short write of a checkpoint; None for anything else."""
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno in _REASONS:
            where = Path(link.filename) if link.filename else folder or Path.cwd()
            return AgentRLError(f"could not write {where}: {_REASONS[link.errno]} ({_space(where)})")
        if isinstance(link, RuntimeError) and any(text in str(link) for text in _TORCH_SHORT_WRITE):
            where = folder or Path.cwd()
            return AgentRLError(f"a file under {where} was written short (torch: {str(link).strip()[-60:]}); is the "
                                f"disk full? ({_space(where)})")
    return None


@contextmanager
def storage_errors_said(folder: Path) -> Iterator[None]:
    """Inside a trainer's process (a Ray actor of verl or OpenRLHF), turn a failed write under ``folder`` into its
    clear error: said on stderr as ``agentrl: error: ...`` (where the user reads the run's output) and raised in
    place of the failure, which stays its cause."""
    try:
        yield
    except BaseException as error:
        clear = storage_error(error, folder)
        if clear is None:
            raise
        print(f"agentrl: error: {clear}", file=sys.stderr, flush=True)
        raise clear from error


def _chain(error: BaseException) -> list[BaseException]:
    """``error``, what caused it, and the remote error a Ray task error carries (its ``cause``)."""
    links: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in links:
        links.append(current)
        remote = getattr(current, "cause", None)
        current = remote if isinstance(remote, BaseException) else current.__cause__ or current.__context__
    return links


def _space(path: Path) -> str:
    """Free and total space of the file system holding ``path`` (its nearest existing parent)."""
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        stats = os.statvfs(existing)
    except OSError as error:
        return f"the space of {existing} is unknown: {error.strerror}"
    free, total = stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
    return f"{free / 2 ** 20:,.0f} MiB free of {total / 2 ** 20:,.0f} MiB on the file system of {existing}"
