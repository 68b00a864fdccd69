"""``kill -9`` of ``agentrl run --framework verl`` after its first checkpoint, while verl's Ray cluster trains: no
process of the run (the driver, Ray's daemons, the TaskRunner and worker actors) outlives it by more than seconds,
and ``agentrl run --resume`` continues it (verl's ``trainer.resume_mode=auto``) to the run never stopped (the session's
one-rank run, ``conftest.one_rank_run``)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

from conftest import cpu_run_env, one_rank_command

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES
from agentrl_plugins.runs.metrics import StepMetrics, without_timing
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import killed_run_leftovers


def comparable(run: RunDir) -> list[StepMetrics]:
    """The rows without their timings, entropy and the sampler/learner mismatch: float noise of how the sampler
    batched the requests (the entropy is compared to 1e-4)."""
    return [replace(without_timing(row), **dict.fromkeys(["entropy", *MISMATCH_FIGURES])) for row in run.read_metrics()]


def test_a_kill_9_after_a_checkpoint_leaves_nothing_running_and_resumes_to_the_run_never_stopped(tmp_path,
                                                                                                  model_dir,
                                                                                                  one_rank_run):
    env, whole, cut = cpu_run_env(tmp_path), one_rank_run, RunDir(tmp_path / "cut")
    marker = cut.checkpoints / "latest_checkpointed_iteration.txt"
    left = killed_run_leftovers(one_rank_command(model_dir, "--out", str(cut.path)), env,
                                started=lambda: marker.is_file() and marker.read_text().strip() == "1")
    assert left == {}, f"{len(left)} processes of the killed run kept running: {sorted(left.values())}"
    assert [row.step for row in cut.read_metrics()] == [0, 1], "step 1 was recorded before its checkpoint"

    resumed = subprocess.run([sys.executable, "-m", "agentrl_plugins", "run", "--resume", str(cut.path)], env=env,
                             capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert comparable(cut) == comparable(whole), "the resumed run's rows are the run never stopped's"
    assert all(abs(a.entropy - b.entropy) < 1e-4 for a, b in zip(cut.read_metrics(), whole.read_metrics())
               if a.entropy is not None)
    assert cut.report_file.is_file() and (cut.final_weights / "config.json").is_file()
