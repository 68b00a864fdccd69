"""An agent program that summarises its history: each later segment is a row of TRL's batch, trained on exactly the
tokens its sampler saw, with its episode's advantage; the group baseline counts the episode once.

The program is a user's own (an ``openai``-client loop registered as an environment plugin); sampling is the
core's batched HF sampler on a small random model, through the real gateway, TRL's own scoring and loss.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
import torch

from agentrl_plugins import hookimpl
from agentrl_plugins.algorithms import rloo
from agentrl_plugins.components import Environment, Verifier
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.types import Task, Trajectory, Verdict

from agentrl_tinyagent.model import build_model
from agentrl_trl.build import agent_trainer
from agentrl_trl.segments import append_segments

TASKS = [Task(f"t{i}", "say", split, f"say something {i}") for i in range(2) for split in ("train", "held_out")]


class SummarisingAgent:
    """Asks three times; before the third call it replaces its history with a summary (a new segment)."""

    def tasks(self, split: str | None = None) -> list[Task]:
        return [task for task in TASKS if split in (None, task.split)]

    def run_agent(self, link: AgentLink) -> list[str]:
        client = openai.OpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0, timeout=30)
        messages = [{"role": "user", "content": link.task.issue}]
        replies: list[str] = []
        for turn in range(3):
            reply = client.chat.completions.create(model=link.model, messages=messages)
            replies.append(reply.choices[0].message.content or "")
            if turn == 1:
                messages = [{"role": "user", "content": f"{link.task.issue} (said {len(replies)} things so far)"}]
            else:
                messages += [{"role": "assistant", "content": replies[-1]}, {"role": "user", "content": "go on"}]
        return replies


def even_first_reply(replies: list[str]) -> Verdict:
    """Reward 1 when the first reply has an even length: varies with the sample, so groups have a spread."""
    passed = len(replies[0]) % 2 == 0
    return Verdict(float(passed), passed, verifier="even_first_reply")


class Plugins:
    @hookimpl
    def agentrl_register_environments(self, register):
        register(Environment("summariser", SummarisingAgent, "An agent program that summarises its history."))

    @hookimpl
    def agentrl_register_verifiers(self, register):
        register(Verifier("even_first_reply", lambda: even_first_reply, "Reward 1 for an even first reply."))


def make_trainer(tmp_path, tokenizer, **overrides):
    manager = PluginManager()
    manager.add_plugin(Plugins(), "summariser-plugins", "summariser-dist")
    recipe = load_recipe("deepswe_grpopp", {
        "environment.name": "summariser", "environment.options": {}, "verifier.names": ["even_first_reply"],
        "rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_new_tokens_per_turn": 6,
        "rollout.max_context_tokens": 512,
        "train.steps": 1, "train.eval_episodes_per_task": 1, "filtering.compact": False, **overrides}, "laptop",
        plugin_manager=manager)
    run = RunDir(tmp_path / "run")
    run.create(recipe, "trl")
    model = build_model(tokenizer, seed=0)
    model.save_pretrained(tmp_path / "model")  # TRL loads its reference model (a KL term) from the model's folder
    made = agent_trainer(recipe, tmp_path / "model", tokenizer, run_dir=run, plugin_manager=manager)
    made.current_gradient_accumulation_steps = 1
    return made


@pytest.fixture
def trainer(tmp_path, tokenizer):
    made = make_trainer(tmp_path, tokenizer)
    yield made
    made.episode_rollout.service.close()


def row_tokens(output: dict[str, Any], row: int) -> tuple[list[int], list[int], list[int], list[float]]:
    """A row's prompt, completion, policy mask and sampler log-probs, without TRL's padding."""
    prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
    kept = output["completion_mask"][row].bool()
    return (prompt, output["completion_ids"][row][kept].tolist(), output["tool_mask"][row][kept].tolist(),
            output["sampling_per_token_logps"][row][kept].tolist())


def test_later_segments_are_rows_with_their_sampled_tokens_and_their_episodes_advantage(trainer):
    output = trainer._generate_and_score_completions([{"prompt": task} for task in ("t0",) * 4 + ("t1",) * 4])
    episodes = trainer.episode_rollout.trajectories
    assert [len(e.segments) for e in episodes] == [1] * 8 and [e.num_turns for e in episodes] == [2] * 8
    assert output["prompt_ids"].size(0) == 8 + 8, "one row per episode, then one per later segment"
    for row, segment in enumerate((e.segments[0] for e in episodes), start=8):
        assert row_tokens(output, row) == (segment.prompt_ids, segment.response_ids, segment.response_mask,
                                           pytest.approx(segment.logprobs, abs=0))
        assert segment.num_turns == 1 and segment.reward == episodes[row - 8].reward
    rewards = torch.tensor([e.reward for e in episodes])
    assert 0 < rewards.sum() < 8, "the sampled replies differ in length parity"
    expected = rloo(rewards, torch.arange(8) // 4, torch.ones(8, dtype=torch.bool), masked_in_baseline=True)
    assert expected.abs().sum() > 0
    mask = output["completion_mask"] * output["tool_mask"]
    scale = 16 / int((mask.sum(-1) > 0).sum())  # seq-mean: every row counts, as verl counts a session's outputs
    for row in range(16):
        on = mask[row].bool()
        value = expected[row % 8].item() * scale
        assert torch.allclose(output["advantages"][row][on], torch.full((int(on.sum()),), value)), row
    assert output["num_items_in_batch"] == mask.sum() == trainer.step_stats["policy_tokens"]
    assert trainer.step_stats["drift_per_episode"] == 1.0


def test_a_later_segments_tokens_move_the_gradient(trainer):
    output = trainer._generate_and_score_completions([{"prompt": task} for task in ("t0",) * 4 + ("t1",) * 4])
    row = next(row for row in range(8, 16) if output["advantages"][row].abs().sum() > 0)

    def gradients(batch):
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, batch).backward()
        return [p.grad.clone() for p in trainer.model.parameters()]

    reference = gradients(output)
    perturbed = dict(output)
    ids = output["completion_ids"].clone()
    ids[row] = torch.randint(10, 90, ids[row].shape, generator=torch.Generator().manual_seed(row))
    perturbed["completion_ids"] = ids
    assert not all(torch.equal(a, b) for a, b in zip(reference, gradients(perturbed)))


def test_a_later_segments_old_and_reference_log_probs_are_the_models(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, **{"optim.updates_per_step": 2, "loss.kl_coef": 0.1})
    try:
        output = trainer._generate_and_score_completions([{"prompt": t} for t in ("t0",) * 4 + ("t1",) * 4])
    finally:
        trainer.episode_rollout.service.close()
    assert {"old_per_token_logps", "ref_per_token_logps"} <= set(output), "TRL computes both for its own rows"
    with torch.no_grad():
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention,
                                                                 output["completion_ids"].size(1))
    mask = output["completion_mask"].bool()
    for key in ("old_per_token_logps", "ref_per_token_logps"):  # the reference is the initial model, unchanged yet
        assert torch.allclose(output[key][8:][mask[8:]], logps[8:][mask[8:]], atol=1e-5), key
        assert torch.allclose(output[key][:8][mask[:8]], logps[:8][mask[:8]], atol=1e-5), key


def test_a_per_row_field_segments_cannot_fill_is_refused_by_name():
    output = {"prompt_ids": torch.zeros(2, 3, dtype=torch.long), "prompt_mask": torch.ones(2, 3, dtype=torch.long),
              "completion_ids": torch.zeros(2, 4, dtype=torch.long), "tool_mask": torch.ones(2, 4, dtype=torch.long),
              "importance_sampling_ratio": torch.ones(2, 4)}
    segment = Trajectory("t", [1], [2], [1], [-0.5], [(0, 1)], "submitted")
    with pytest.raises(ValueError, match=r"per-row fields \['importance_sampling_ratio'\]"):
        append_segments(output, [segment], pad_id=0)
