"""On-policy distillation in OpenRLHF, which has none of its own: the shipped executor has the teacher score each
episode's sampled tokens, each sample's label carries the signal, and the adapter's ``compute_advantages_and_returns``
inside OpenRLHF's ``RemoteExperienceMaker`` gives each action token the task's leave-one-out value plus
-coef * (log p_sampler - log p_teacher); the recorder's ``teacher_kl`` is read from the executor's logs."""

from __future__ import annotations

import pytest
import torch
from test_advantages import per_sample_advantages, step_experiences
from transformers import AutoModelForCausalLM

from agentrl_plugins.algorithms import rloo
from agentrl_plugins.runs.figures import episode_figures
from agentrl_plugins.testing import forward_logprobs, sharpened_teacher

from agentrl_openrlhf.patches import patches
from agentrl_openrlhf.recorder import episode_counts
from agentrl_tinyagent.model import build_model

COEF = 0.5


@pytest.fixture(scope="module")
def teacher_folder(tmp_path_factory, tokenizer):
    return sharpened_teacher(build_model(tokenizer, seed=7), tokenizer, tmp_path_factory.mktemp("teacher"))


@pytest.mark.parametrize("task_reward", [True, False])
async def test_each_action_token_gets_the_teachers_signal_beside_the_task_advantage(
        use_recipe, model, tokenizer, monkeypatch, teacher_folder, task_reward):
    recipe = use_recipe({"distillation.teacher": str(teacher_folder), "distillation.coef": COEF,
                         "distillation.task_reward": task_reward})
    (patch,) = [p for p in patches(recipe) if p.name == "compute_advantages_and_returns"]
    monkeypatch.setattr(patch.owner, patch.name, patch.replacement)
    maker, experiences, responses = await step_experiences(recipe, model, tokenizer, monkeypatch)
    maker.compute_advantages_and_returns(experiences)

    rewards = torch.tensor([r["reward"] for r in responses])
    valid = torch.tensor([r["action_ranges"] != [] for r in responses])
    assert rewards.tolist() == [1, 0, 0, 1, 1, 0, 0, 0] and valid.tolist() == [1, 1, 0, 1, 1, 0, 0, 1]
    task = rloo(rewards, torch.arange(8) // 4, valid, masked_in_baseline=True) * task_reward
    teacher = AutoModelForCausalLM.from_pretrained(teacher_folder, dtype=torch.float32).eval()
    for row, (response, values) in enumerate(zip(responses, per_sample_advantages(experiences), strict=True)):
        tokens = response["observation_tokens"]
        gap = torch.tensor(response["rollout_log_probs"][1:]) - forward_logprobs(teacher, tokens[:1], tokens[1:])
        on = torch.zeros(len(tokens) - 1, dtype=torch.bool)
        for start, end in response["action_ranges"]:
            on[start - 1:end - 1] = True
        assert values.numel() == int(on.sum()) and (values.numel() > 0) == bool(valid[row])
        assert torch.allclose(values, task[row] - COEF * gap[on], atol=1e-5), row
        if valid[row]:
            assert response["extra_logs"]["teacher_gap"] == pytest.approx(float(gap[on].sum()), rel=1e-5)
            assert response["extra_logs"]["teacher_tokens"] == on.sum().item()

    logs = [r["extra_logs"] for r in responses]
    expected = sum(log["teacher_gap"] for log in logs) / sum(log["teacher_tokens"] for log in logs)
    assert all(log["teacher_tokens"] > 0 and log["teacher_seconds"] > 0 for log in logs), \
        "filtered episodes were scored too, each with its share of the teacher's forwards"
    assert episode_figures(episode_counts(experiences))["teacher_kl"] == pytest.approx(expected, rel=1e-6)
