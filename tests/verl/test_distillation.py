"""On-policy distillation in verl: the agentrl agent loop, under verl's own ``AgentLoopWorker``, has the teacher
score each episode's sampled tokens, the turn record carries the signal to the advantage step, and verl's own
``compute_advantage`` gives each policy token the task's leave-one-out value plus -coef * (log p_sampler -
log p_teacher). The teacher is a local model folder, as a user names a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FakeServerManager, verl_config
from test_agent_loop import SCRIPTS, run_rows
from transformers import AutoModelForCausalLM
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from agentrl_plugins.algorithms import rloo
from agentrl_plugins.algorithms.credit import TurnRecord
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import forward_logprobs, sharpened_teacher

from agentrl_tinyagent.model import build_model
from agentrl_verl.config import LaunchPaths
from agentrl_verl.episodes import EPISODES_FILE, read_episodes
from agentrl_verl.verl_plugin.estimators import TURNS_FIELD, carried_turns

COEF = 0.5
FAMILIES = ["clamp", "span", "count_up", "clamp"]


@pytest.fixture(scope="module")
def teacher_folder(tmp_path_factory, tokenizer):
    return sharpened_teacher(build_model(tokenizer, seed=7), tokenizer, tmp_path_factory.mktemp("teacher"))


@pytest.mark.parametrize("task_reward", [True, False])
def test_verls_advantage_step_adds_the_teachers_signal_to_each_policy_token(model_dir, tmp_path, model, tokenizer,
                                                                           teacher_folder, task_reward):
    overrides = {"distillation.teacher": str(teacher_folder), "distillation.coef": COEF,
                 "distillation.task_reward": task_reward, "loss.aggregation": "token-mean"}
    out = run_rows(model_dir, tmp_path, FakeServerManager(model, tokenizer, scripts=SCRIPTS), FAMILIES, **overrides)
    batch = out.batch
    records = [TurnRecord.from_fields(fields) for fields in out.non_tensor_batch[TURNS_FIELD]]
    teacher = AutoModelForCausalLM.from_pretrained(teacher_folder, dtype=torch.float32).eval()
    width, signals = batch["prompts"].size(1), []
    for row, record in enumerate(records):
        mask = batch["response_mask"][row].bool()
        prompt = batch["prompts"][row][batch["attention_mask"][row, :width].bool()].tolist()
        length = int(batch["attention_mask"][row, width:].sum())
        teacher_lp = forward_logprobs(teacher, prompt, batch["responses"][row, :length].tolist())
        signal = torch.zeros(mask.numel(), dtype=torch.float64)
        signal[:length] = -COEF * (batch["rollout_log_probs"][row, :length].double() - teacher_lp.double())
        signals.append(signal * mask)
        if mask.any():  # a filtered episode's row keeps no policy token
            assert record.covers(mask.tolist())
            assert torch.allclose(torch.tensor(record.token_values, dtype=torch.float64), signal[mask], atol=1e-5)

    recipe = load_recipe("deepswe_grpopp", overrides, "laptop")
    config = verl_config(recipe, LaunchPaths(str(model_dir), tmp_path))
    uid = np.array(["g"] * len(FAMILIES), dtype=object)
    data = DataProto.from_single_dict({"token_level_rewards": batch["rm_scores"],
                                       "response_mask": batch["response_mask"], "uid": uid})
    with carried_turns(records):
        data = compute_advantage(data, adv_estimator=config.algorithm.adv_estimator, num_repeat=len(FAMILIES),
                                 config=config.algorithm)
    rewards = batch["rm_scores"].sum(-1)
    valid = batch["response_mask"].sum(-1) > 0
    assert rewards.tolist() == [1.0, 0.0, 0.0, 1.0] and valid.tolist() == [True, True, False, True]
    task = rloo(rewards, torch.zeros(4, dtype=torch.long), valid, masked_in_baseline=True) * task_reward
    for row in range(len(FAMILIES)):
        mask = batch["response_mask"][row].bool()
        expected = (task[row] + torch.stack(signals)[row]) * mask
        assert torch.allclose(data.batch["advantages"][row].double() * mask, expected, atol=1e-5), row
    assert data.batch["advantages"][2].abs().sum() == 0, "the filtered episode gets neither part"

    episodes = read_episodes(tmp_path / "run" / EPISODES_FILE)
    assert len(episodes) == len(FAMILIES) and all(e.teacher_tokens == e.sampled_policy_tokens > 0 for e in episodes)
    assert all(e.teacher_seconds > 0 for e in episodes), "each episode's share of the teacher's forwards"
    for episode in (e for e in episodes if not e.filtered):  # the episode log's gap, for the step's teacher_kl
        row = next(row for row in range(len(FAMILIES))
                   if batch["responses"][row, :len(episode.response_ids)].tolist() == episode.response_ids)
        assert episode.teacher_gap == pytest.approx(float(-signals[row].sum() / COEF), rel=1e-5)
