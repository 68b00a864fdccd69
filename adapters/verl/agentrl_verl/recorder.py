"""After ``main_ppo``: the run folder's ``metrics.jsonl`` and report, from the episode log and verl's metrics.

Per step, the figures come from where they are measured: rewards, hacks, filtering
and loss tokens from the episodes the agent loop logged (``episodes.py``); clip
fraction, entropy, the correction's capped fraction and the step time from
verl's own metrics file (``VERL_FILE_LOGGER_PATH``). Held-out pass@1 is the
mean verdict of the held-out episodes run on that step's weights.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.episodes import EpisodeRecord, read_episodes

EPISODES_FILE = "episodes.jsonl"
VERL_METRICS_FILE = "verl_metrics.jsonl"
CAPPED_KEYS = ("rollout_corr/rollout_is_ratio_fraction_high", "actor/agentrl/capped_fraction")


def verl_metrics(path: Path) -> dict[int, dict[str, Any]]:
    """verl's logged metrics by step (later lines of a step, e.g. after a resume, win)."""
    steps: dict[int, dict[str, Any]] = defaultdict(dict)
    if path.exists():
        for line in path.read_text().splitlines():
            if line:
                row = json.loads(line)
                steps[int(row["step"])].update(row["data"])
    return dict(steps)


def number(value: Any) -> float | None:
    """A finite float, or None for verl's missing and NaN values."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def step_rows(episodes: list[EpisodeRecord], metrics: dict[int, dict[str, Any]]) -> list[StepMetrics]:
    """One row per trained step, plus step 0 when the starting policy was evaluated."""
    train, held_out = defaultdict(list), defaultdict(list)
    for episode in episodes:
        if episode.split == "train":
            train[episode.weights_version + 1].append(episode)
        else:
            held_out[episode.weights_version].append(episode)
    rows = []
    for step in sorted(set(train) | ({0} & set(held_out))):
        batch, evaluated, verl = train.get(step, []), held_out.get(step, []), metrics.get(step, {})
        capped = next((verl[key] for key in CAPPED_KEYS if key in verl), None)
        rows.append(StepMetrics(
            step=step,
            train_reward=mean(e.reward for e in batch),
            heldout_pass1=mean(float(e.passed) for e in evaluated),
            heldout_hacked_fraction=mean(float(e.hacked) for e in evaluated),
            hacked_fraction=mean(float(e.hacked) for e in batch),
            filtered_fraction=mean(float(e.filtered) for e in batch),
            clip_fraction=number(verl.get("actor/pg_clipfrac")),
            is_capped_fraction=number(capped),
            entropy=number(verl.get("actor/entropy")),
            policy_tokens=sum(e.policy_tokens for e in batch),
            seconds=number(verl.get("timing_s/step")) or number(verl.get("timing_s/testing")) or 0.0,
        ))
    return rows


def record_run(run: RunDir) -> Path:
    """Write ``metrics.jsonl`` (replacing it) and the report; returns the report's path."""
    rows = step_rows(read_episodes(run.path / EPISODES_FILE), verl_metrics(run.path / VERL_METRICS_FILE))
    run.metrics_file.write_text("".join(json.dumps(row.to_dict()) + "\n" for row in rows))
    return write_report(run)
