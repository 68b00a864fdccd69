"""The parity table: each framework's numbers beside the core reference, with the largest difference.

A framework is held to the core reference of the recipe, or, where it declares a difference
by design, to the reference of the recipe with that difference applied (so the rest is still
checked exactly); the size of each by-design difference is the gap between the two references.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from agentrl_plugins.compare.batch import ParityBatch, ParityResult
from agentrl_plugins.compare.reference import reference
from agentrl_plugins.recipe import apply_overrides
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import FIGURES

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

TOLERANCE = 1e-6
"""Largest absolute difference of an exact component (float64)."""
QUANTITIES: dict[str, tuple[Callable[[ParityResult], Any], Callable[[Any], str]]] = {
    "advantages": (lambda r: r.advantages, lambda v: f"norm {v.norm().item():.6f}"),
    "per-token weights": (lambda r: r.weights, lambda v: f"sum {v.sum().item():.6f}"),
    "loss": (lambda r: r.loss, lambda v: f"{v:.9f}"),
    "gradient": (lambda r: r.gradient, lambda v: f"norm {v.norm().item():.9f}"),
    "gradient norm": (lambda r: r.gradient_norm, lambda v: f"{v:.9f}"),
}
"""Each compared quantity: how to read it from a result and how to show it."""

FIGURE_PREFIX = "figure "
"""The rows of the step figures (:data:`~agentrl_plugins.runs.figures.FIGURES`): ``figure entropy``, ..."""


@dataclass(frozen=True)
class ParityRow:
    framework: str
    quantity: str
    value: str
    reference: str
    max_abs_diff: float
    held_to: str
    reported: bool = True
    by_design: str = ""

    @property
    def exact(self) -> bool:
        return self.reported and self.max_abs_diff <= TOLERANCE

    @property
    def verdict(self) -> str:
        if not self.reported:
            return "not reported"
        return "exact" if self.exact else "by design" if self.by_design else "**MISMATCH**"


@dataclass(frozen=True)
class DesignDifference:
    """A by-design difference of one framework: what it computes instead, why, and how much it changes."""

    framework: str
    overrides: dict[str, Any]
    cause: str
    sizes: dict[str, float]


@dataclass(frozen=True)
class ParityTable:
    rows: list[ParityRow]
    differences: list[DesignDifference]

    @property
    def mismatches(self) -> list[ParityRow]:
        return [row for row in self.rows if row.reported and not row.exact and not row.by_design]

    @property
    def figure_differences(self) -> list[ParityRow]:
        """Figures a framework defines otherwise for this recipe, as it declares (shown with their size)."""
        return [row for row in self.rows if row.by_design and not row.exact]

    @property
    def unreported(self) -> list[ParityRow]:
        """Figures a framework's recorder does not make (its rows say so; they are no mismatch)."""
        return [row for row in self.rows if not row.reported]


def max_abs_diff(a: Any, b: Any) -> float:
    if a is None or b is None:
        return 0.0 if a is b else float("inf")
    if isinstance(a, float):
        return abs(a - b)
    if a.shape != b.shape:
        return float("inf")
    return (a - b).abs().max().item() if a.numel() else 0.0


def _figure(result: ParityResult, name: str) -> float | None:
    value = result.figures.get(name)
    return None if value is None else float(value)


def _show_figure(value: float | None) -> str:
    return "not reported" if value is None else f"{value:.9f}"


def _rows(result: ParityResult, ref: ParityResult, held_to: str) -> list[ParityRow]:
    rows = [ParityRow(result.framework, name, show(read(result)), show(read(ref)),
                      max_abs_diff(read(result), read(ref)), held_to)
            for name, (read, show) in QUANTITIES.items()]
    for name in FIGURES:
        value, expected = _figure(result, name), _figure(ref, name)
        rows.append(ParityRow(result.framework, FIGURE_PREFIX + name, _show_figure(value), _show_figure(expected),
                              max_abs_diff(value, expected), held_to, reported=value is not None,
                              by_design=result.figure_notes.get(name, "")))
    return rows


def _sizes(a: ParityResult, b: ParityResult) -> dict[str, float]:
    sizes = {name: max_abs_diff(read(a), read(b)) for name, (read, _) in QUANTITIES.items()}
    for name in FIGURES:
        value, other = _figure(a, name), _figure(b, name)
        if value is not None and other is not None:
            sizes[FIGURE_PREFIX + name] = max_abs_diff(value, other)
    return sizes


def parity_table(recipe: Recipe, batch: ParityBatch, results: Sequence[ParityResult],
                 plugin_manager: PluginManager | None = None) -> ParityTable:
    """Every framework's rows, against the core reference (with its declared by-design differences applied)."""
    base = reference(recipe, batch, plugin_manager)
    rows: list[ParityRow] = []
    differences: list[DesignDifference] = []
    for result in results:
        overrides = {key: value for design in result.by_design for key, value in design.overrides.items()}
        if not overrides:
            rows += _rows(result, base, "core")
            continue
        variant = reference(apply_overrides(recipe, overrides, f"{result.framework} by design"), batch, plugin_manager)
        held_to = "core with " + ", ".join(f"{key}={value}" for key, value in overrides.items())
        rows += _rows(result, variant, held_to)
        for design in result.by_design:
            alone = reference(apply_overrides(recipe, design.overrides, "by design"), batch, plugin_manager)
            differences.append(DesignDifference(result.framework, design.overrides, design.cause, _sizes(alone, base)))
    return ParityTable(rows, differences)


def markdown(table: ParityTable) -> str:
    """The table as Markdown: one row per framework and quantity."""
    lines = ["| framework | quantity | framework value | core value | max abs diff | held to | verdict |",
             "|---|---|---|---|---|---|---|"]
    for row in table.rows:
        difference = f"{row.max_abs_diff:.3g}" if row.reported else "-"
        lines.append(f"| {row.framework} | {row.quantity} | {row.value} | {row.reference} | {difference} | "
                     f"{row.held_to} | {row.verdict} |")
    return "\n".join(lines)


def differences_markdown(table: ParityTable) -> str:
    """By-design differences with their cause and size (largest change of each quantity)."""
    if not table.differences and not table.figure_differences:
        return "None: every framework computes the recipe's numbers."
    lines = [f"- **{row.framework}** {row.quantity}: {row.by_design}. Size: {row.max_abs_diff:.3g}."
             for row in table.figure_differences]
    for difference in table.differences:
        sizes = ", ".join(f"{name} {size:.3g}" for name, size in difference.sizes.items())
        settings = ", ".join(f"{key}={value}" for key, value in difference.overrides.items())
        lines.append(f"- **{difference.framework}** computes with {settings}: {difference.cause}. "
                     f"Size (max abs change vs the recipe's reference): {sizes}.")
    return "\n".join(lines)
