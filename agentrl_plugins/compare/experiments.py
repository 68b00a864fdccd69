"""The book's "what we would test" experiments as named learning comparisons, each with the predictions it checks.

An experiment trains its recipes on one framework over the same seeds and sample budget (a learning comparison,
:mod:`agentrl_plugins.compare.learning`), writes the learning report, and adds a verdict per prediction: the
book expects one figure (a ``metrics.jsonl`` column, averaged over each run's training steps) to be higher in
one arm than in another. It *held* when the difference of the seed means exceeds the larger of the two arms'
seed spreads, was *contradicted* when it exceeds it the other way, and is *not resolved* otherwise.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Sequence

from agentrl_plugins.compare.learning import ArmResult
from agentrl_plugins.compare.trust_region import ProbeRow, probe_rows, probe_table
from agentrl_plugins.errors import RecipeError, did_you_mean
from agentrl_plugins.plugins import PluginManager, get_plugin_manager
from agentrl_plugins.recipe import read_toml
from agentrl_plugins.runs.metrics import METRIC_NAMES


@dataclass(frozen=True)
class Prediction:
    """The book's claim that ``figure`` is higher in arm ``higher`` than in arm ``lower`` (recipe names)."""

    claim: str
    figure: str
    higher: str
    lower: str

    def __post_init__(self):
        if self.figure not in METRIC_NAMES:
            raise ValueError(f"prediction {self.claim!r}: {self.figure!r} is no metrics.jsonl figure")


@dataclass(frozen=True)
class Experiment:
    """Recipes compared at one sample budget (``overrides`` apply to every arm), and the predictions checked."""

    name: str
    description: str
    recipes: tuple[str, ...]
    predictions: tuple[Prediction, ...]
    overrides: tuple[str, ...] = ()
    trust_region_probe: bool = False


EXPERIMENT_KEYS = {"description": str, "recipes": list, "overrides": list, "predictions": list,
                   "trust_region_probe": bool}
PREDICTION_KEYS = ("claim", "figure", "higher", "lower")


def read_experiment(name: str, path: Path) -> Experiment:
    """The experiment in the TOML file at ``path``: ``description``, ``recipes`` (a list of names),
    ``overrides`` (recipe overrides every arm shares), ``trust_region_probe`` (a boolean) and one
    ``[[predictions]]`` table per prediction (``claim``, ``figure``, ``higher``, ``lower``). A key it lacks or does
    not know, a value of the wrong type, or a prediction about a recipe it does not train is a clear error."""
    raw = read_toml(path)

    def refuse(problem: str) -> NoReturn:
        raise RecipeError(f"experiment {name!r} ({path}): {problem}")

    unknown = sorted(set(raw) - set(EXPERIMENT_KEYS))
    if unknown:
        refuse(f"unknown key {unknown[0]!r}.{did_you_mean(unknown[0], EXPERIMENT_KEYS)} Known: "
               f"{', '.join(EXPERIMENT_KEYS)}")
    for key in ("description", "recipes", "predictions"):
        if key not in raw:
            refuse(f"'{key}' is missing")
    for key, kind in EXPERIMENT_KEYS.items():
        if key in raw and not isinstance(raw[key], kind):
            refuse(f"'{key}' must be {'a list' if kind is list else kind.__name__}, got {raw[key]!r}")
    for key in ("recipes", "overrides"):
        if not all(isinstance(item, str) for item in raw.get(key, [])):
            refuse(f"'{key}' must list strings, got {raw[key]!r}")
    predictions = []
    for index, table in enumerate(raw["predictions"]):
        where = f"predictions[{index}]"
        if not isinstance(table, dict) or sorted(table) != sorted(PREDICTION_KEYS) or \
                not all(isinstance(value, str) for value in table.values()):
            refuse(f"{where} must be a table of the strings {', '.join(PREDICTION_KEYS)}, got {table!r}")
        for arm in (table["higher"], table["lower"]):
            if arm not in raw["recipes"]:
                refuse(f"{where} compares {arm!r}, which is not one of its recipes ({', '.join(raw['recipes'])})")
        try:
            predictions.append(Prediction(*(table[key] for key in PREDICTION_KEYS)))
        except ValueError as error:
            refuse(f"{where}: {error}")
    return Experiment(name, raw["description"], tuple(raw["recipes"]), tuple(predictions),
                      tuple(raw.get("overrides", ())), raw.get("trust_region_probe", False))


def experiment(name: str, plugin_manager: PluginManager | None = None) -> Experiment:
    """The registered experiment ``name``, read from its file; an unknown name lists the close ones."""
    record = (plugin_manager or get_plugin_manager()).get("experiment", name)
    return read_experiment(name, record.path)


def seed_means(result: ArmResult, figure: str) -> list[float]:
    """Per seed, the mean of ``figure`` over the run's training steps that have it (seeds with none left out)."""
    means = []
    for run in result.runs.values():
        values = [getattr(row, figure) for row in run.read_metrics()
                  if row.step > 0 and getattr(row, figure) is not None]
        if values:
            means.append(statistics.fmean(values))
    return means


@dataclass(frozen=True)
class Verdict:
    prediction: Prediction
    higher: list[float]
    lower: list[float]

    @property
    def difference(self) -> float | None:
        if not self.higher or not self.lower:
            return None
        return statistics.fmean(self.higher) - statistics.fmean(self.lower)

    @property
    def spread(self) -> float:
        return max((max(v) - min(v) for v in (self.higher, self.lower) if v), default=0.0)

    @property
    def outcome(self) -> str:
        if self.difference is None:
            return "not resolved: an arm has no value of this figure"
        if self.difference > self.spread:
            return "held"
        if self.difference < -self.spread:
            return "contradicted"
        return "not resolved: the difference is within the seed spread"

    def line(self) -> str:
        p = self.prediction
        if self.difference is None:
            return f"- **{p.claim}** ({p.figure}, {p.higher} vs {p.lower}): {self.outcome}."
        return (f"- **{p.claim}** ({p.figure}: {p.higher} {statistics.fmean(self.higher):.3f} vs {p.lower} "
                f"{statistics.fmean(self.lower):.3f}, difference {self.difference:+.3f}, seed spread "
                f"{self.spread:.3f}): {self.outcome}.")


def verdicts(chosen: Experiment, results: Sequence[ArmResult]) -> list[Verdict]:
    by_recipe = {result.arm.name: result for result in results}
    return [Verdict(p, seed_means(by_recipe[p.higher], p.figure), seed_means(by_recipe[p.lower], p.figure))
            for p in chosen.predictions]


def probe_verdict(rows: Sequence[ProbeRow]) -> str:
    """Whether GSPO's length-normalised ratio lets a large change at a few tokens of the longest trajectory through
    unclipped where the token clip catches it."""
    longest = max(row.length for row in rows)
    few = min(row.changed for row in rows if row.changed > 1) if any(row.changed > 1 for row in rows) else 1
    small = min(row.delta for row in rows)
    picked = {row.loss: row for row in rows if (row.length, row.changed, row.delta) == (longest, few, small)}
    gspo, token = picked.get("gspo"), picked.get("ppo_clip")
    if gspo is None or token is None:
        return "- **GSPO's geometric mean under-constrains long episodes**: not resolved (no gspo or ppo_clip arm)."
    held = gspo.clip_fraction == 0 and token.clip_fraction > 0
    return (f"- **GSPO's geometric mean under-constrains long episodes** (L = {longest}, {few} tokens moved by "
            f"{small:+g}: gspo clips {gspo.clip_fraction:.4f} of the tokens, ppo_clip {token.clip_fraction:.4f}): "
            f"{'held' if held else 'contradicted'}.")


def experiment_section(chosen: Experiment, results: Sequence[ArmResult]) -> str:
    """The report's section on the book's predictions: a verdict line each, and the probe where it has one."""
    lines = [verdict.line() for verdict in verdicts(chosen, results)]
    text = "## The book's predictions\n\n"
    if chosen.trust_region_probe:
        rows = probe_rows(chosen.recipes)
        lines.append(probe_verdict(rows))
        text += "\n".join(lines) + "\n\n### The trust-region probe\n\nOne trajectory of L policy tokens, ratio 1 " \
            "except at the changed tokens, one positive advantage; each arm's policy loss with its recipe's clip " \
            "range.\n\n" + probe_table(rows)
    else:
        text += "\n".join(lines)
    return text


def append_section(report: Path, section: str) -> None:
    report.write_text(report.read_text().rstrip("\n") + "\n\n" + section + "\n")
