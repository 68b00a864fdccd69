"""verl's sync trainer, recording the agentrl run when verl's config names a recipe (``+agentrl.recipe``).

Registered as verl's ``sync`` trainer (``trainer.v1.trainer_mode=sync``, verl's default), so verl's own
``main_ppo`` command gets it with no extra setting; without ``+agentrl.recipe`` it is verl's trainer
unchanged. With it, before anything is built, verl's config is checked against the recipe
(:mod:`agentrl_verl.own_config`) and the dataset against the recipe's environment; then every step
(and the evaluation before the first) is recorded in the run folder and logged by verl's loggers
(:mod:`agentrl_verl.recorder`); after the last, ``final/`` and the report are written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transfer_queue as tq
from verl import DataProto
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from agentrl_plugins.algorithms.credit import TurnRecord, check_turn_records
from agentrl_plugins.algorithms.mismatch import MismatchSums
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import loss_token_mean
from agentrl_plugins.runs.storage import storage_errors_said

from agentrl_verl.mismatch import driver_metrics
from agentrl_verl.names import ON_POLICY_KEY, PREFIX
from agentrl_verl.own_config import CHECKED_KEY, reconcile_config, record, setting_rows, value_at
from agentrl_verl.recipe_file import RECIPE_KEY, select
from agentrl_verl.recorder import ENTROPY_KEY, StepRecorder
from agentrl_verl.verl_plugin.estimators import TURNS_FIELD, carried_sessions, carried_turns
from agentrl_verl.verl_plugin.on_policy import ON_POLICY

MODE = "sync"


def check_dataset(config: Any, recipe: Recipe) -> None:
    """The train and validation files hold the recipe's environment, with its options, in the recipe's splits."""
    env = recipe.environment
    for key, split in (("data.train_files", env.train_split), ("data.val_files", env.eval_split)):
        files = value_at(config, key)
        first = next(iter([files] if isinstance(files, str) else files or []), None)
        hint = "write it with `agentrl verl prepare RECIPE --run-dir DIR` (DIR/data/<split>.parquet)"
        if first is None or not Path(first).is_file():
            raise AgentRLError(f"{key}={files!r} is not the agentrl dataset of recipe {recipe.name!r}: {hint}")
        info = pd.read_parquet(first, columns=["extra_info"]).iloc[0]["extra_info"]
        found = (info.get("environment"), json.loads(info.get("environment_options") or "{}"), info.get("split"))
        if found != (env.name, env.options, split):
            raise AgentRLError(f"{first} holds environment {found[0]!r} with options {found[1]} (split {found[2]!r}); "
                               f"recipe {recipe.name!r} needs {env.name!r} with options {env.options} (split "
                               f"{split!r}): {hint}")


def token_mean_entropy(batch: Any) -> float | None:
    """The policy's entropy averaged over the batch's loss tokens (the one definition of the ``entropy``
    figure in every framework; verl's ``actor/entropy`` aggregates it the way the loss aggregates). None when
    verl computed no entropies (its bypass mode)."""
    try:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["entropy", "response_mask"])
    except (KeyError, ValueError):
        return None
    padded = DataProto(batch=data.to_padded_tensor()).batch
    return loss_token_mean(padded["entropy"], padded["response_mask"])


def old_policy_mismatch(batch: Any) -> MismatchSums | None:
    """The mismatch sums of verl's old-policy pass against the sampler's log-probs over the loss tokens; None
    without the sampler's (``rollout.calculate_log_probs=false``)."""
    try:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["old_log_probs", "rollout_log_probs", "response_mask"])
    except (KeyError, ValueError):
        return None
    padded = DataProto(batch=data.to_padded_tensor()).batch
    return MismatchSums.of(padded["old_log_probs"], padded["rollout_log_probs"], padded["response_mask"])


def turn_level(estimator: str) -> bool:
    """Whether verl's ``algorithm.adv_estimator`` is an agentrl estimator that needs the rows' turns."""
    name = estimator[len(PREFIX):] if estimator.startswith(PREFIX) else None
    return name is not None and get_plugin_manager().get("advantage", name).level != "trajectory"


def batch_turns(batch: Any, estimator: str) -> list[TurnRecord]:
    """Each row's turn record, in the batch's row order, from the agent loop's ``extra_fields``; each checked
    against the row's response mask (its spans must be exactly the policy tokens)."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                           select_fields=["extra_fields", "response_mask"])
    records = [TurnRecord.from_fields(fields[TURNS_FIELD]) if isinstance(fields, dict) and TURNS_FIELD in fields
               else None for fields in data["extra_fields"]]
    masks = DataProto(batch=data.select("response_mask").to_padded_tensor()).batch["response_mask"]
    try:
        return check_turn_records(records, masks, f"algorithm.adv_estimator={estimator}")
    except ValueError as error:
        raise AgentRLError(f"{error} (rows without turns come from an agent loop other than agentrl's, or one whose "
                           "recipe, +agentrl.recipe, names a trajectory-level estimator)") from None


def on_policy_update(config: Any) -> bool:
    """Whether the update scores the old policy in its own forward (:mod:`.on_policy`): ``+agentrl.on_policy_update``
    when set (``true`` refused where the pass is not the update's own forward), else on a CPU wherever it is exact."""
    actor, algorithm = config.actor_rollout_ref.actor, config.algorithm
    correction = algorithm.get("rollout_correction") or {}
    reasons = [reason for reason, present in (
        (f"actor_rollout_ref.actor.ppo_epochs={actor.ppo_epochs}", actor.ppo_epochs != 1),
        ("a rollout correction (algorithm.rollout_correction.rollout_is / rollout_rs / bypass_mode)",
         any(correction.get(key) for key in ("rollout_is", "rollout_rs", "bypass_mode"))),
        ("algorithm.use_kl_in_reward=true", bool(algorithm.get("use_kl_in_reward"))),
    ) if present]
    asked = select(config, ON_POLICY_KEY)
    if asked is None:
        return not reasons and str(config.trainer.get("device", "")) == "cpu"
    if asked and reasons:
        raise AgentRLError(f"+{ON_POLICY_KEY}=true: the update must start from the weights that scored the old "
                           f"policy and use its log-probs nowhere else, but verl's config has {', '.join(reasons)}; "
                           f"remove +{ON_POLICY_KEY}")
    return bool(asked)


def unscored_old_policy(batch: Any) -> Any:
    """The batch with NaN ``old_log_probs``: the on-policy update scores the old policy in its own forward, and a
    use of these anywhere else shows as NaN rather than as a plausible number."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
    data["old_log_probs"] = data["response_mask"].to(torch.float32) * float("nan")
    return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=data.select("old_log_probs"))


def start_recorder(config: Any) -> StepRecorder | None:
    """The run's recorder after the checks, or None when verl's config names no recipe. The rule on verl's config
    ran in ``main_ppo``'s driver (:func:`~agentrl_verl.own_config.check_in_driver`); without a driver that ran it,
    it runs here, where the overrides the user typed are unknown (values are compared with verl's defaults)."""
    path = select(config, RECIPE_KEY)
    if path is None:
        return None
    recorder = StepRecorder.for_recipe_file(Path(str(path)))
    check_dataset(config, recorder.recipe)
    if not select(config, CHECKED_KEY):
        changes = reconcile_config(config, recorder.recipe)
        record(recorder.run, recorder.recipe, changes, setting_rows(config, recorder.recipe, changes, {}))
    return recorder


class AgentRLTrainer(PPOTrainerSync):
    """:class:`PPOTrainerSync` plus the agentrl run folder and figures (inert without ``+agentrl.recipe``)."""

    def __init__(self, config: Any):
        self.agentrl = start_recorder(config)
        self.agentrl_training = False
        self.agentrl_checkpoint_due = False
        self.agentrl_on_policy = self.agentrl is not None and on_policy_update(config)
        super().__init__(config)

    def _load_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        loaded = super()._load_checkpoint(*args, **kwargs)
        if self.agentrl is not None and self.global_steps > 0:
            self.agentrl.resume_from(self.global_steps)
        return loaded

    def on_train_begin(self) -> None:
        super().on_train_begin()
        self.agentrl_training = True

    def _validate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        metrics = super()._validate(*args, **kwargs)
        if self.agentrl is not None and not self.agentrl_training:
            metrics.update(self.agentrl.record(self.global_steps, metrics))
        return metrics

    def _compute_old_log_prob(self, batch: Any, metrics: dict[str, Any]) -> Any:
        if self.agentrl_on_policy:
            return unscored_old_policy(batch)
        batch = super()._compute_old_log_prob(batch, metrics)
        if self.agentrl is not None:
            entropy = token_mean_entropy(batch)
            if entropy is not None:
                metrics[ENTROPY_KEY] = entropy
            sums = old_policy_mismatch(batch)
            if sums is not None:
                metrics.update(driver_metrics(sums))
        return batch

    def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
        estimator = str(self.config.algorithm.adv_estimator)
        distills = self.agentrl is not None and self.agentrl.recipe.distillation.enabled
        with carried_sessions(batch.keys):
            if not (turn_level(estimator) or distills):
                batch = super()._compute_advantage(batch, metrics)
            else:
                with carried_turns(batch_turns(batch, estimator)):
                    batch = super()._compute_advantage(batch, metrics)
        if self.agentrl_on_policy:  # verl's sampler/learner figures need the old-policy pass it skipped
            for key in [key for key in metrics if key.startswith("rollout_corr/")]:
                del metrics[key]
        return batch

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        if self.agentrl is None:
            return super()._get_required_batch_multiple(dp_size)
        return dp_size  # one mini-batch of every row (_update_actor): the ranks' shares are all it must divide

    def _update_actor(self, batch: Any, metrics: dict[str, Any]) -> Any:
        """verl's update, with the recipe's one mini-batch per step made of every row: an agent program's later
        segments add rows, which verl would otherwise split into more mini-batches (more optimizer steps)."""
        if self.agentrl is None:
            return super()._update_actor(batch, metrics)
        group = self.actor_rollout_wg
        update = group.update_actor

        def whole_batch(data: Any) -> Any:
            data.extra_info.update(global_batch_size=len(data), mini_batch_size=len(data))
            if self.agentrl_on_policy:
                data.extra_info.update({ON_POLICY: True, "calculate_entropy": True})
            return update(data)

        group.update_actor = whole_batch
        try:
            return super()._update_actor(batch, metrics)
        finally:
            group.update_actor = update

    def _save_checkpoint(self) -> None:
        """verl's checkpoint, which during training waits for the step's row (:meth:`_compute_metrics`): a kill
        between the two never leaves a checkpointed step without its row. (verl's ``timing_s/save_checkpoint``
        then times the wait, not the save.)"""
        if self.agentrl is not None and self.agentrl_training:
            self.agentrl_checkpoint_due = True
        else:
            super()._save_checkpoint()

    def _compute_metrics(self, batch: Any, metrics: dict[str, Any], timing_raw: Any, global_steps: int,
                         epoch: int) -> Any:
        computed = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        if self.agentrl is not None:
            metrics.update(self.agentrl.record(global_steps, metrics))
            if self.agentrl_checkpoint_due:
                self.agentrl_checkpoint_due = False
                super()._save_checkpoint()
        return computed

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        if self.agentrl is None:
            return super().fit(*args, **kwargs)
        with storage_errors_said(self.agentrl.run.path):
            result = super().fit(*args, **kwargs)
            if self.agentrl_training and self.config.trainer.save_freq <= 0:
                self.save_last_step()
            self.agentrl.finish(Path(self.config.trainer.default_local_dir) if self.agentrl_training else None)
        return result

    def save_last_step(self) -> None:
        """Checkpoint the last trained step, which ``trainer.save_freq<=0`` leaves unsaved: ``final/`` is its actor
        (said on stderr)."""
        self.global_steps -= 1  # verl's fit counts one past the last step it trained
        try:
            super()._save_checkpoint()
        finally:
            self.global_steps += 1
        print(f"trainer.save_freq={self.config.trainer.save_freq} saves no checkpoint: agentrl saved the last step's "
              f"(global_step_{self.global_steps - 1} in {self.config.trainer.default_local_dir}) to write final/",
              file=sys.stderr, flush=True)


def refusing(mode: str, trainer: type) -> type:
    """``trainer`` (verl's trainer of another mode), refusing a config that names a recipe: nothing would be
    recorded."""

    def __init__(self: Any, config: Any) -> None:
        if select(config, RECIPE_KEY) is not None:
            raise AgentRLError(f"trainer.v1.trainer_mode={mode!r}: agentrl records runs of verl's {MODE!r} trainer "
                               f"only; set trainer.v1.trainer_mode={MODE} (verl's default)")
        trainer.__init__(self, config)

    return type(trainer.__name__, (trainer,), {"__init__": __init__, "__module__": __name__,
                                               "__doc__": refusing.__doc__})


def register_trainer() -> type[AgentRLTrainer]:
    """Make :class:`AgentRLTrainer` verl's ``sync`` trainer (a subclass of verl's own); verl's other modes
    refuse a config that names a recipe."""
    for mode, trainer in list(TRAINER_REGISTRY.items()):
        if mode != MODE and trainer.__module__ != __name__:
            TRAINER_REGISTRY[mode] = refusing(mode, trainer)
    TRAINER_REGISTRY[MODE] = AgentRLTrainer
    return AgentRLTrainer


TRAINER = register_trainer()
