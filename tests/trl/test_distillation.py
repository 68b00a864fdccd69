"""On-policy distillation in TRL's own GRPOTrainer: the teacher scores the student's tokens as sampled, each policy
token's advantage gains -coef * (log p_sampler - log p_teacher), and training on it moves the student toward the
teacher. The teacher is a second seeded model, saved as a local folder (the way a user names a checkpoint)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import STALL
from test_trainer import INPUTS, SCRIPTS, make_trainer

from agentrl_plugins.algorithms import rloo
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.testing import forward_logprobs, sharpened_teacher

from agentrl_tinyagent.model import build_model
from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

COEF = 0.5


@pytest.fixture(scope="module")
def teacher_folder(tmp_path_factory, tokenizer):
    """A seeded model with a sharpened output layer: its distribution is far from the student's."""
    return sharpened_teacher(build_model(tokenizer, seed=7), tokenizer, tmp_path_factory.mktemp("teacher"))


def response_logprobs(model, trajectory):
    return forward_logprobs(model, trajectory.prompt_ids, trajectory.response_ids)


def teacher_logprobs(folder, trajectory):
    from transformers import AutoModelForCausalLM

    return response_logprobs(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(), trajectory)


@pytest.mark.parametrize("task_reward", [True, False])
def test_each_policy_token_gets_the_teachers_reverse_kl_beside_the_task_advantage(
        tmp_path, model, tokenizer, scripted, teacher_folder, task_reward):
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS), **{
        "distillation.teacher": str(teacher_folder), "distillation.coef": COEF,
        "distillation.task_reward": task_reward})
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])
    trajectories = trainer.episode_rollout.trajectories
    rewards = torch.tensor([t.reward for t in trajectories])
    valid = torch.tensor([t.termination == "submitted" for t in trajectories])
    task = rloo(rewards, torch.tensor([0] * 4 + [1] * 4), valid, masked_in_baseline=True)
    mask = output["completion_mask"] * output["tool_mask"]
    scale = 8 / int(valid.sum())
    for row, trajectory in enumerate(trajectories):
        teacher = teacher_logprobs(teacher_folder, trajectory)
        assert torch.allclose(torch.tensor(trajectory.teacher_logprobs), teacher, atol=1e-5)
        sampler = torch.tensor(trajectory.logprobs)
        on = mask[row, :len(sampler)].bool()
        expected = (task[row] * task_reward - COEF * (sampler - teacher)) * scale
        assert torch.allclose(output["advantages"][row, :len(sampler)][on], expected[on], atol=1e-5)
        observation = ~torch.tensor(trajectory.response_mask, dtype=torch.bool)
        assert torch.all(torch.tensor(trajectory.token_advantages)[observation] == 0), "observations get no signal"
    assert (mask[~valid].sum()) == 0, "a filtered episode keeps no loss token, signal or not"
    gap = sum((torch.tensor(t.logprobs) - torch.tensor(t.teacher_logprobs))[torch.tensor(t.response_mask).bool()].sum()
              for t in trajectories) / sum(t.policy_tokens for t in trajectories)
    assert trainer.step_stats["teacher_kl"] == pytest.approx(float(gap), rel=1e-6)


def test_training_on_the_signal_alone_moves_the_student_toward_the_teacher(tmp_path, model, tokenizer, scripted,
                                                                          teacher_folder):
    solve_all = {family.name: [policies.solver(family)] * 4 for family in FAMILIES}
    trainer, run = make_trainer(tmp_path, model, tokenizer, scripted(solve_all), **{
        "distillation.teacher": str(teacher_folder), "distillation.task_reward": False, "train.steps": 4,
        "train.eval_every": 4, "optim.lr": 3e-3})
    trainer.train()
    rows = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    assert all(isinstance(row["teacher_kl"], float) for row in rows if row["step"] >= 1), rows
    assert all(0 < row["teacher_seconds"] < row["rollout_seconds"] for row in rows if row["step"] >= 1), \
        "the teacher's forwards are a part of the rollout"

    def distance(student, trajectories):
        """The mean |log p_student - log p_teacher| over the episodes' policy tokens."""
        gaps = [(response_logprobs(student, t) - torch.tensor(t.teacher_logprobs))[torch.tensor(t.response_mask).bool()]
                for t in trajectories]
        return torch.cat(gaps).abs().mean().item()

    played = trainer.episode_rollout.trajectories
    before, after = distance(build_model(tokenizer, seed=0).eval(), played), distance(trainer.model.eval(), played)
    assert after < 0.8 * before, f"the student did not move toward the teacher: {before:.3f} -> {after:.3f}"


def test_a_teacher_with_another_vocabulary_is_refused_before_it_scores(tmp_path, model, tokenizer, scripted):
    from agentrl_plugins.local_models import byte_chat_tokenizer

    from agentrl_tinyagent.tokenizer import build_tokenizer

    other = byte_chat_tokenizer(["unrelated_word"])
    folder = tmp_path / "other"
    build_model(other, seed=1).save_pretrained(folder)
    other.save_pretrained(folder)
    assert other.get_vocab() != build_tokenizer().get_vocab()
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted({"clamp": [STALL], "span": [STALL]}),
                              **{"distillation.teacher": str(folder)})
    with pytest.raises(AgentRLError, match="its tokenizer is not the student's"):
        trainer._generate_and_score_completions([dict(row) for row in INPUTS])
