"""Run a function once a module has finished importing: now if it has, else right after it does.

verl loads its plugins on ``import verl``, in each of a run's processes, and most
of those processes never import the parts agentrl-verl registers into (the agent
loop module alone costs about two seconds to import). Registering when verl
imports a part, instead of importing the part to register, keeps that cost to the
processes that use it.

A function that raises is recorded in :data:`FAILURES` and warned about with
:class:`DeferredRegistrationWarning`; the module it waited for imports as verl
wrote it, so a broken plugin never breaks verl itself (verl's own plugin loader
does the same, at debug level).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import traceback
import warnings
from types import ModuleType
from typing import Any, Callable

Callback = Callable[[ModuleType], Any]

FAILURES: dict[str, str] = {}
"""By ``module: function``, the traceback of each function that raised."""


class DeferredRegistrationWarning(UserWarning):
    """A function waiting for a module raised when the module was imported."""


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: finds watched modules through the other finders and wraps their loaders."""

    def __init__(self) -> None:
        self.pending: dict[str, list[tuple[Callback, str]]] = {}
        self.lock = threading.RLock()

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _CallingLoader(spec.loader, self)
                return spec
        return None

    def run(self, module: ModuleType) -> None:
        with self.lock:
            callbacks = self.pending.pop(module.__name__, [])
        for callback, name in callbacks:
            call(callback, module, name)


class _CallingLoader(importlib.abc.Loader):
    """The module's own loader; after it executes the module, the module's waiting functions run."""

    def __init__(self, loader: Any, finder: _AfterImportFinder):
        self.loader, self.finder = loader, finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.finder.run(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


_FINDER = _AfterImportFinder()


def call(callback: Callback, module: ModuleType, name: str) -> None:
    """Run ``callback(module)``; a failure is recorded (as ``name``) and warned about, not raised into the import."""
    try:
        callback(module)
    except Exception:
        key = f"{module.__name__}: {name}"
        FAILURES[key] = traceback.format_exc(limit=-4)
        warnings.warn(f"agentrl-verl: {key} failed after {module.__name__} was imported; agentrl's names it "
                      f"registers are missing in this process:\n{FAILURES[key]}", DeferredRegistrationWarning,
                      stacklevel=2)


def after_import(module: str, callback: Callback, name: str | None = None) -> None:
    """Call ``callback(module)`` once ``module`` has finished importing, or at once if it is imported already
    (verl loads its plugins before any of its submodules, so the modules watched here are never half-imported).
    ``name`` (by default the callback's) names it in a failure."""
    name = name or getattr(callback, "__qualname__", repr(callback))
    with _FINDER.lock:
        loaded = sys.modules.get(module)
        if loaded is None:
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            _FINDER.pending.setdefault(module, []).append((callback, name))
            return
    call(callback, loaded, name)


def import_awaited() -> None:
    """Import every module a function still waits for, so that each has run (or failed into :data:`FAILURES`)."""
    while _FINDER.pending:
        importlib.import_module(next(iter(_FINDER.pending)))
