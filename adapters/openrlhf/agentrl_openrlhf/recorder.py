"""The run folder from inside OpenRLHF's ``PPOTrainer``: a ``metrics.jsonl`` row per step, as the TRL run writes.

The runtime-env hook installs these wrappers when ``AGENTRL_OPENRLHF_RUN_DIR`` names the run
folder (``agentrl run`` sets it). OpenRLHF's own code still does the work; the wrappers only read:

- ``PPOTrainer.fit`` evaluates the starting policy first (step 0, as the TRL run does), then writes the report; a
  resumed run (``--ckpt.load_enable``) first drops the rows after its checkpoint's step and tells the CPU rollout
  engine the step it starts from;
- ``RemoteExperienceMaker.make_experience_batch`` counts each step's episodes, their mean reward and loss tokens,
  and those of compact-filtered episodes (which must be zero), and keeps each episode's counts for the episode
  figures (an agent program's later segments are rows of their own: their tokens count, their rows are not
  episodes);
- ``PPOTrainer.save_logs_and_checkpoints`` (inherited; Ray's actor class holds its own copy)
  stops a step whose gathered policy loss is not finite (naming the recipe's policy loss), turns
  OpenRLHF's step status into :class:`StepMetrics`, appends the raw status to ``openrlhf_steps.jsonl`` and
  logs the row's ``agentrl/`` figures with OpenRLHF's own loggers (W&B, TensorBoard), all before OpenRLHF
  saves the step's checkpoint (a resume never lacks a checkpointed step's row). A step ``fit`` evaluates is
  evaluated there, ahead of ``fit`` (whose call gets the same figures), and so is the last step when
  ``eval.steps`` skips it, with the best checkpoint ``fit`` would save;
- ``SamplesGenerator.generate_eval_samples`` keeps the held-out episodes for pass@1 and the
  hacked fraction, read from the agent executor's per-episode logs.
"""

from __future__ import annotations

import functools
import operator
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import ray
import torch

from agentrl_plugins.algorithm import check_finite_loss
from agentrl_plugins.algorithms.mismatch import MismatchSums
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.runs.figures import EpisodeCounts, episode_figures
from agentrl_plugins.runs.journal import append_line, read_lines, rewrite_lines
from agentrl_plugins.runs.metrics import StepMetrics, finite, logged_figures
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.runs.storage import storage_errors_said

from agentrl_openrlhf.patches import Patch, target
from agentrl_openrlhf.recipe_env import RECIPE_ENV, RUN_DIR_ENV, recipe_from_env
from agentrl_openrlhf.segments import episode_rows

STEPS_FILE = "openrlhf_steps.jsonl"
TRAINER = "openrlhf.trainer.ppo_trainer"
FIT = (TRAINER, "PPOTrainer", "fit", ("self", "global_step"))
EVALUATE = (TRAINER, "PPOTrainer", "evaluate", ("self", "global_step", "generate_kwargs"))
SAVE_LOGS = (TRAINER, "PPOTrainer", "save_logs_and_checkpoints", ("self", "global_step", "logs_dict",
                                                                       "client_states"))
MAKE_EXPERIENCE = ("openrlhf.trainer.ppo_utils.experience_maker", "RemoteExperienceMaker", "make_experience_batch",
                   ("self", "rollout_samples"))
EVAL_SAMPLES = ("openrlhf.trainer.ppo_utils.samples_generator", "SamplesGenerator", "generate_eval_samples",
                ("self", "generate_kwargs"))


@dataclass(frozen=True)
class StepRows:
    """One step's episodes, their mean reward, its loss tokens (every row's, an agent program's later segments
    included), the compact-filtered episodes' (zero when filtering holds) and the sampler/learner mismatch sums
    over the loss tokens (None without the rollout engine's log-probs)."""

    episodes: int
    train_reward: float
    policy_tokens: int
    filtered_episodes: int
    filtered_loss_tokens: int
    mismatch: MismatchSums | None = None


@dataclass
class StepRecorder:
    """Writes the run folder's rows; a row waits in ``pending`` for its step's evaluation."""

    run: RunDir
    hooks: Any
    started: float = field(default_factory=time.monotonic)
    pending: StepMetrics | None = None
    evaluated: tuple[int, dict[str, Any]] | None = None

    def resume_from(self, step: int) -> None:
        """Drop what a resume from step ``step``'s checkpoint runs again (0: no checkpoint, everything)."""
        self.run.truncate_metrics(step if step else -1)
        steps = self.run.path / STEPS_FILE
        rewrite_lines(steps, [row for row in read_lines(steps) if row["step"] <= step])

    def write(self, row: StepMetrics, trainer: Any) -> None:
        """Record ``row`` and log its agentrl figures with OpenRLHF's own loggers (under ``train/``)."""
        record_step(self.run, row, self.hooks)
        for logger in (trainer.wandb_logger, trainer.tensorboard_logger):
            if logger is not None:
                logger.log_train(row.step, logged_figures(row))
        self.started = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self.started


def mismatch_sums(experiences: Sequence[Any]) -> MismatchSums | None:
    """The mismatch sums of the actor's old-policy log-probs (``action_log_probs``) against the rollout engine's,
    over each experience's loss tokens; None when an experience has no engine log-probs."""
    if not experiences or any(e.rollout_log_probs is None or e.action_log_probs is None for e in experiences):
        return None
    return functools.reduce(operator.add, (MismatchSums.of(e.action_log_probs, e.rollout_log_probs, e.action_mask)
                                           for e in experiences))


def step_rows(experiences: Sequence[Any]) -> StepRows:
    """Count a step's episodes (rows that are not later segments) and their mean reward, loss tokens
    (``action_mask``) over every row, those of rows logged ``filtered``, and the mismatch sums."""
    masks = [e.action_mask for e in experiences]
    filtered = [e.info["filtered"].reshape(-1).bool() if "filtered" in e.info else torch.zeros(len(m), dtype=bool)
                for e, m in zip(experiences, masks)]
    episode = [episode_rows(e.info, len(m)) for e, m in zip(experiences, masks)]
    rewards = torch.cat([e.info["reward"].reshape(-1)[rows] for e, rows in zip(experiences, episode)])
    return StepRows(episodes=int(sum(rows.sum() for rows in episode)), train_reward=rewards.float().mean().item(),
                    policy_tokens=int(sum(m.sum() for m in masks)),
                    filtered_episodes=int(sum((f & rows).sum() for f, rows in zip(filtered, episode))),
                    filtered_loss_tokens=int(sum(m[f].sum() for m, f in zip(masks, filtered))),
                    mismatch=mismatch_sums(experiences))


def episode_counts(experiences: Sequence[Any]) -> list[EpisodeCounts]:
    """Each training episode's counts from the executor's logs on its row (``passed``, ``policy_tokens``,
    ``redundant_turns``, ``drift``, the teacher's ``teacher_gap``, ``teacher_tokens`` and ``teacher_seconds``);
    none when another executor played them."""
    keys = ("passed", "policy_tokens", "redundant_turns", "drift", "teacher_gap", "teacher_tokens", "teacher_seconds")
    if not experiences or any(key not in e.info for e in experiences for key in keys):
        return []
    episode = [episode_rows(e.info, len(e.action_mask)) for e in experiences]
    columns = [torch.cat([e.info[key].reshape(-1)[rows] for e, rows in zip(experiences, episode)]).tolist()
               for key in keys]
    return [EpisodeCounts(bool(passed), int(tokens), int(redundant), int(drift), float(gap), int(scored), float(spent))
            for passed, tokens, redundant, drift, gap, scored, spent in zip(*columns)]


def held_out(samples: Sequence[Any]) -> tuple[float, float]:
    """Held-out pass@1 and hacked fraction over every evaluation episode, from the executor's logs."""
    passed = torch.cat([s.info["passed"].reshape(-1) for s in samples]).float()
    hacked = torch.cat([s.info["hacked"].reshape(-1) for s in samples]).float()
    return passed.mean().item(), hacked.mean().item()


def train_row(step: int, status: dict[str, Any], rows: StepRows, seconds: float,
              episodes: Sequence[EpisodeCounts] = ()) -> StepMetrics:
    """A step's row from OpenRLHF's status (means over the step's rows), its episodes and loss-token counts and its
    episodes' counts (:func:`episode_counts`). Without
    a correction OpenRLHF logs no filter ratio: nothing was limited. Its entropy is logged only when the recipe
    sets an entropy coefficient (otherwise the row has no entropy figure)."""
    return StepMetrics(
        step=step, train_reward=rows.train_reward, heldout_pass1=None, heldout_hacked_fraction=None,
        hacked_fraction=status.get("hacked"), filtered_fraction=rows.filtered_episodes / max(rows.episodes, 1),
        clip_fraction=finite(status.get("ppo_clip_ratio")),
        is_capped_fraction=finite(status.get("is_filter_ratio", 0.0)), entropy=finite(status.get("entropy_loss")),
        policy_tokens=rows.policy_tokens, seconds=seconds, rollout_seconds=finite(status.get("timing/generation")),
        **episode_figures(episodes), **({} if rows.mismatch is None else rows.mismatch.figures()))


def _numbers(status: dict[str, Any]) -> dict[str, float]:
    return {key: float(value) for key, value in status.items() if isinstance(value, (int, float))}


def _openrlhf_evaluates(trainer: Any, step: int) -> bool:
    """Whether ``PPOTrainer.fit`` evaluates after this step's logs."""
    return bool(trainer.eval_dataloader) and step % trainer.args.eval.steps == 0


def _is_last_step(trainer: Any, client_states: dict[str, Any] | None) -> bool:
    """Whether the step just trained is the run's last: in the last episode, every prompt of every episode drawn
    (``fit``'s count, which a resume restores; the prompts dataloader yields one at a time) and none of their
    samples left waiting in the generator's buffer."""
    states = client_states or {}
    episodes = trainer.args.train.num_episodes
    return (states.get("episode") == episodes - 1
            and states.get("total_consumed_prompts", 0) >= len(trainer.prompts_dataloader) * episodes
            and not getattr(trainer.samples_generator, "_sample_buffer", None))


def _eval_kwargs(trainer: Any) -> dict[str, Any]:
    """What ``PPOTrainer.fit`` passes to ``evaluate``."""
    return {**trainer.generate_kwargs, "temperature": trainer.args.eval.temperature,
            "n_samples_per_prompt": trainer.args.eval.n_samples_per_prompt}


def fit_method(original: Any) -> Any:
    @functools.wraps(original)
    def fit(self, global_step: int = 0) -> None:
        run = RunDir(Path(os.environ[RUN_DIR_ENV]))
        with storage_errors_said(run.path):
            recorded_fit(self, original, run, global_step)

    return fit


def recorded_fit(trainer: Any, original: Any, run: RunDir, global_step: int) -> None:
    """OpenRLHF's ``fit`` (``original``) with the run folder: resumed from, evaluated at step 0, reported."""
    trainer.agentrl_recorder = StepRecorder(run, get_plugin_manager().hook)
    if trainer.args.ckpt.load_enable:
        step = trainer.init_checkpoint_states()["global_step"]
        trainer.agentrl_recorder.resume_from(step)
        if step and trainer.vllm_engines and all(hasattr(e, "resume_at") for e in trainer.vllm_engines):
            ray.get([engine.resume_at.remote(step) for engine in trainer.vllm_engines])  # the CPU rollout engine
    if global_step == 0 and trainer.eval_dataloader and not run.read_metrics():
        trainer.evaluate(0, **_eval_kwargs(trainer))
    original(trainer, global_step)
    if trainer.tensorboard_logger is not None:
        trainer.tensorboard_logger.close()
    rows = run.read_metrics()
    if trainer.eval_dataloader and rows and rows[-1].heldout_pass1 is None:
        print(f"agentrl: step {rows[-1].step}, the run's last, has no held-out evaluation: the prompts ran out "
              "on a batch that dynamic filtering emptied, after the step was logged", file=sys.stderr, flush=True)
    if rows:
        print(f"report: {write_report(run)}", file=sys.stderr, flush=True)


def evaluate_method(original: Any) -> Any:
    @functools.wraps(original)
    def evaluate(self, global_step, **generate_kwargs):
        recorder = self.agentrl_recorder
        if recorder.evaluated is not None and recorder.evaluated[0] == global_step:
            return recorder.evaluated[1]  # evaluated before the step's checkpoint (save_logs_and_checkpoints)
        logs = original(self, global_step, **generate_kwargs)
        pass_at_1, hacked = held_out(self.samples_generator.agentrl_eval_samples)
        row = recorder.pending or StepMetrics(global_step, None, None, None, None, None, None, None, None, 0, 0.0)
        recorder.pending = None
        recorder.write(StepMetrics(**{**row.to_dict(), "heldout_pass1": pass_at_1, "heldout_hacked_fraction": hacked,
                                      "eval_seconds": recorder.seconds()}), self)
        return logs

    return evaluate


def save_logs_method(original: Any) -> Any:
    @functools.wraps(original)
    def save_logs_and_checkpoints(self, global_step: int, logs_dict=None, client_states=None) -> None:
        if logs_dict and "policy_loss" in logs_dict and os.environ.get(RECIPE_ENV):
            check_finite_loss(recipe_from_env().loss.policy, float(logs_dict["policy_loss"]))
        recorder = self.agentrl_recorder
        rows = self.experience_maker.agentrl_step_rows
        status = {"step": global_step, **asdict(rows), "status": _numbers(logs_dict)}
        append_line(recorder.run.path / STEPS_FILE, status)
        row = train_row(global_step, logs_dict, rows, recorder.seconds(), self.experience_maker.agentrl_episodes)
        last = (not _openrlhf_evaluates(self, global_step) and bool(self.eval_dataloader)
                and _is_last_step(self, client_states))
        if _openrlhf_evaluates(self, global_step) or last:
            recorder.pending = row
            recorder.started = time.monotonic()
            recorder.evaluated = (global_step, self.evaluate(global_step, **_eval_kwargs(self)))
        else:
            recorder.write(row, self)
        original(self, global_step, logs_dict, client_states)
        if last:
            self.save_best_checkpoint(recorder.evaluated[1], global_step, client_states)

    return save_logs_and_checkpoints


def make_experience_method(original: Any) -> Any:
    @functools.wraps(original)
    def make_experience_batch(self, rollout_samples):
        experiences = original(self, rollout_samples)
        self.agentrl_step_rows = step_rows(experiences)
        self.agentrl_episodes = episode_counts(experiences)
        return experiences

    return make_experience_batch


def eval_samples_method(original: Any) -> Any:
    @functools.wraps(original)
    def generate_eval_samples(self, **generate_kwargs):
        self.agentrl_eval_samples = original(self, **generate_kwargs)
        return self.agentrl_eval_samples

    return generate_eval_samples


WRAPPERS = ((FIT, fit_method), (EVALUATE, evaluate_method), (SAVE_LOGS, save_logs_method),
            (MAKE_EXPERIENCE, make_experience_method), (EVAL_SAMPLES, eval_samples_method))


def recorder_patches() -> list[Patch]:
    """The wrappers, each target checked against OpenRLHF 0.11.2."""
    found = []
    for spec, wrap in WRAPPERS:
        owner = target(*spec)
        found.append(Patch(owner, spec[2], wrap(getattr(owner, spec[2]))))
    return found
