"""The run folder: resolved recipe, seed and versions, ``metrics.jsonl``, checkpoints, final weights, report."""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.metadata
import json
import os
import platform
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import tomli_w

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import build_recipe, recipe_to_dict
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.journal import append_line, read_lines, rewrite_lines
from agentrl_plugins.runs.metrics import StepMetrics

LIBRARIES = ("torch", "transformers", "trl", "verl", "openrlhf", "peft", "accelerate", "deepspeed", "ray")
"""Libraries that decide a run's numbers besides the plugins' own distributions."""


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def package_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """Installed versions of the packages that decide a run's numbers: every plugin's distribution, and
    :data:`LIBRARIES` (or ``names``)."""
    if names is None:
        from agentrl_plugins.plugins import get_plugin_manager

        plugins = {info.distribution for info in get_plugin_manager().plugin_table() if info.status == "ok"}
        names = sorted(plugins) + list(LIBRARIES)
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def read_recipe_file(path: Path) -> Recipe:
    """The resolved recipe in a run folder's ``recipe.toml``: how every framework's worker reads its recipe.

    Cached per file and modification time, so a worker that asks once per episode reads the file once.
    """
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise AgentRLError(f"recipe file {path} is not readable here: a framework's workers read the run folder's "
                           "recipe.toml, so the run folder must be on storage they share") from None
    return _read_recipe_file(str(path), stamp)


@functools.lru_cache(maxsize=16)
def _read_recipe_file(path: str, stamp: int) -> Recipe:
    return build_recipe(tomllib.loads(Path(path).read_text()), origin=path)


def write_recipe_file(path: Path, recipe: Recipe) -> Path:
    """``recipe``, resolved, as a ``recipe.toml`` that :func:`read_recipe_file` reads back equal."""
    path.write_text(tomli_w.dumps(_without_none(recipe_to_dict(recipe))))
    return path


@dataclass(frozen=True)
class RunDir:
    """A run's folder on disk; every file name lives here."""

    path: Path

    @classmethod
    def default(cls, recipe: Recipe, framework: str, root: Path = Path("runs")) -> RunDir:
        """``runs/RECIPE-FRAMEWORK-seedN-STAMP``, with ``-2``, ``-3``, ... when a run started in the same second
        has the name."""
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"{recipe.name}-{framework}-seed{recipe.train.seed}-{stamp}"
        path, count = root / name, 1
        while path.exists():
            count += 1
            path = root / f"{name}-{count}"
        return cls(path)

    recipe_file = property(lambda self: self.path / "recipe.toml")
    run_file = property(lambda self: self.path / "run.json")
    metrics_file = property(lambda self: self.path / "metrics.jsonl")
    checkpoints = property(lambda self: self.path / "checkpoints")
    final_weights = property(lambda self: self.path / "final")
    final_staging = property(lambda self: self.path / "final.partial")
    report_file = property(lambda self: self.path / "report.md")

    def create(self, recipe: Recipe, framework: str, extra: dict[str, Any] | None = None) -> None:
        """Write the resolved recipe, the seed and the package versions into a new folder (or an empty one); a
        folder that already holds a run is refused, naming ``--resume``: a fresh run never merges into it."""
        held = [path.name for path in (self.run_file, self.metrics_file, self.checkpoints) if path.exists()]
        if held:
            raise AgentRLError(f"{self.path} already holds a run ({held[0]}): continue it with `agentrl run --resume "
                               f"{self.path}`, or start the fresh run in another folder")
        self.path.mkdir(parents=True, exist_ok=True)
        write_recipe_file(self.recipe_file, recipe)
        self.run_file.write_text(json.dumps({
            "recipe": recipe.name, "framework": framework, "seed": recipe.train.seed,
            "versions": package_versions(), **(extra or {}),
        }, indent=2) + "\n")

    def load_recipe(self) -> Recipe:
        """The recipe this run was started with (for ``--resume``)."""
        if not self.recipe_file.exists():
            raise AgentRLError(f"{self.path} is not a run folder: {self.recipe_file.name} is missing")
        return read_recipe_file(self.recipe_file)

    def run_info(self) -> dict[str, Any]:
        return json.loads(self.run_file.read_text())

    def update_info(self, **fields: Any) -> None:
        """Add ``fields`` to ``run.json`` (replacing those of the same name)."""
        self.run_file.write_text(json.dumps({**self.run_info(), **fields}, indent=2) + "\n")

    @contextlib.contextmanager
    def exporting_final(self) -> Iterator[Path]:
        """A folder to write the final weights into, renamed to ``final/`` once the block completes: a kill
        meanwhile leaves no half-written ``final/``, only a staging folder the next export starts afresh."""
        shutil.rmtree(self.final_staging, ignore_errors=True)
        self.final_staging.mkdir(parents=True)
        yield self.final_staging
        if self.final_weights.exists():  # a resumed run's export replaces the earlier one
            shutil.rmtree(self.final_weights)
        os.replace(self.final_staging, self.final_weights)

    def append_metrics(self, row: StepMetrics) -> None:
        append_line(self.metrics_file, row.to_dict())

    def read_metrics(self) -> list[StepMetrics]:
        """The rows of ``metrics.jsonl``. A torn last line (a kill during its append) is left out: that step
        had no checkpoint yet, so a resume runs it again. A bad line before the last is an error."""
        rows = []
        for number, row in enumerate(read_lines(self.metrics_file), 1):
            try:
                rows.append(StepMetrics.from_dict(row))
            except (KeyError, TypeError) as error:
                raise AgentRLError(f"{self.metrics_file}, line {number}: not a metrics row ({error!r})") from None
        return rows

    def truncate_metrics(self, last_step: int) -> None:
        """Drop rows after ``last_step`` (steps that ran after the checkpoint a resume starts from), and a torn
        last line; atomically, so a kill meanwhile loses no row."""
        rewrite_lines(self.metrics_file, [row.to_dict() for row in self.read_metrics() if row.step <= last_step])
