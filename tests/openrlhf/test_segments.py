"""An agent program's later segments as rows of OpenRLHF 0.11.2's own step (:mod:`agentrl_openrlhf.segments`).

The BugFix gym's agent program with a one-exchange window (``keep_turns=1``) drifts once in a three-turn episode:
its third prompt no longer extends what was sampled before. The shipped executor plays it in OpenRLHF's own rollout
code on a FakeLLMEngine; OpenRLHF's ``SamplesGenerator`` makes the rows, its ``RemoteExperienceMaker`` splits them
and the patched estimator gives the advantages; its own ``ActorPPOTrainer.ppo_train`` cuts the micro-batches.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from conftest import FakeLLMEngine, engine_spans, flags_of, parse_openrlhf_cli, rollout
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.segments import UntrainedSegmentsWarning

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.config import plan
from agentrl_openrlhf.patches import installed
from agentrl_openrlhf.segments import SEGMENT_LOG, SEGMENTS, make_experience_method, ppo_train_method

AGENT = {"environment.name": "bugfix_agent", "environment.options": {"keep_turns": 1}, "rollout.max_turns": 3,
         "filtering.compact": False}
REWARDS = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
"""Set on the two groups' episodes (the random TinyAgent solves nothing): a baseline to get wrong."""


async def responses_of(recipe, model, tokenizer) -> list[dict]:
    """Two groups of four episodes, each episode's reward (and its segments') one of :data:`REWARDS`."""
    engine = FakeLLMEngine(model, tokenizer)
    found = [r for task in ("clamp", "span") for r in await rollout(engine, tokenizer, task, recipe.rollout.group_size)]
    for response, reward in zip(found, REWARDS, strict=True):
        for row in (response, *response.get(SEGMENTS, ())):
            row["reward"] = row["scores"] = reward
    return found


async def test_the_executor_hands_each_later_segment_along_as_it_was_sampled(use_recipe, model, tokenizer):
    use_recipe(AGENT)
    engine = FakeLLMEngine(model, tokenizer)
    (response,) = await rollout(engine, tokenizer, "clamp", 1)
    (segment,) = response[SEGMENTS]
    assert response["extra_logs"]["drift"] == 1.0
    assert (response["extra_logs"][SEGMENT_LOG], segment["extra_logs"][SEGMENT_LOG]) == (0.0, 1.0)
    tokens, episode = segment["observation_tokens"], response["observation_tokens"]
    assert tokens[:len(episode)] != episode, "a segment is a sequence of its own, not the episode's continuation"
    spans = engine_spans(engine, tokens)
    assert segment["action_ranges"] and all(tuple(span) in spans for span in segment["action_ranges"])
    for start, end in segment["action_ranges"]:
        assert tuple(segment["rollout_log_probs"][start:end]) == spans[(start, end)], "the sampler's log-probs"
    assert (segment["reward"], segment["truncated"]) == (response["reward"], response["truncated"])
    assert response["extra_logs"]["policy_tokens"] == sum(
        end - start for row in (response, segment) for start, end in row["action_ranges"]), "every segment counts"


async def test_a_turn_level_estimator_hands_no_segment_along_and_says_so(use_recipe, model, tokenizer):
    use_recipe({**AGENT, "advantage.estimator": "grpo_turns"})
    with pytest.warns(UntrainedSegmentsWarning, match="1 later segment.*turn-level estimator"):
        (response,) = await rollout(FakeLLMEngine(model, tokenizer), tokenizer, "clamp", 1)
    assert SEGMENTS not in response and response["extra_logs"]["drift"] == 1.0


@pytest.mark.parametrize("estimator", ["rloo", "grpo"])
async def test_segments_carry_their_episodes_advantage_and_groups_count_episodes(use_recipe, model, tokenizer,
                                                                                 monkeypatch, estimator):
    """OpenRLHF's rows through its own ``SamplesGenerator``, ``split_rollout_samples`` and (patched)
    ``compute_advantages_and_returns``; RLOO is OpenRLHF's own estimator for any other environment."""
    recipe = use_recipe({**AGENT, "advantage.estimator": estimator})
    assert plan(recipe).advantages and plan(recipe).segments
    args = parse_openrlhf_cli(flags_of(OpenRLHFAdapter().describe(recipe).command), monkeypatch)
    responses = await responses_of(recipe, model, tokenizer)
    later = sum(len(r.get(SEGMENTS, ())) for r in responses)
    assert later >= 4, "most episodes drift once"
    maker = RemoteExperienceMaker(None, None, None, None, FixedKLController(args.algo.kl.init_coef),
                                  SimpleNamespace(args=args), tokenizer)

    def made(self, rollout_samples):
        """OpenRLHF's ``make_experience_batch`` without its Ray model forwards (zero log-probs and KL)."""
        experiences = self.split_rollout_samples(rollout_samples)
        for experience in experiences:
            experience.action_log_probs = torch.zeros(experience.action_mask.shape)
            experience.kl = torch.zeros(experience.action_mask.shape)
        return self.compute_advantages_and_returns(experiences)

    with installed(recipe):
        samples = [SamplesGenerator._process_response_into_experience(None, r, max_len=1024) for r in responses]
        experiences = make_experience_method(made)(maker, samples)
    rows = [(i, e.advantages[row][e.action_mask[row].bool()], e.sequences[row][e.attention_mask[row].bool()].tolist())
            for e in experiences for row, i in enumerate(e.index)]
    rows.sort(key=lambda row: row[0])
    assert len(rows) == 8 + later
    expected = RecipeAlgorithm.from_recipe(recipe).advantages(torch.tensor(REWARDS), torch.arange(8) // 4,
                                                              ["max_turns"] * 8).values
    owners = [episode for episode, r in enumerate(responses) for _ in r.get(SEGMENTS, ())]
    for index, values, tokens in rows:
        episode = index if index < 8 else owners[index - 8]
        source = responses[index] if index < 8 else responses[episode][SEGMENTS][index - 8 - owners.index(episode)]
        assert tokens == source["observation_tokens"], "each row is exactly its episode's or segment's tokens"
        assert values.numel() > 0 and torch.allclose(values, torch.full_like(values, expected[episode].item()))
    by_rows = RecipeAlgorithm.from_recipe(recipe).advantages(
        torch.tensor(REWARDS + [REWARDS[e] for e in owners]), torch.cat([torch.arange(8), torch.tensor(owners)]) // 4,
        ["max_turns"] * (8 + later)).values
    assert not torch.allclose(by_rows[:8], expected), "groups counting rows, not episodes, would move the baselines"


async def test_one_optimizer_step_takes_every_row(use_recipe, model, tokenizer, monkeypatch):
    """OpenRLHF's own ``ppo_train`` (its data loader, its gradient-accumulation windows) over a rank's replay buffer
    of 8 episodes and their segments, with 2 rows a micro-batch and 4 micro-batches an optimizer step: every row is
    trained once an epoch, in one window (one optimizer step), as the 8 episodes alone would be. Its DeepSpeed
    training step is replaced by one that records what it is given."""
    recipe = use_recipe(AGENT)
    responses = await responses_of(recipe, model, tokenizer)
    samples = [SamplesGenerator._process_response_into_experience(None, row, max_len=1024)
               for r in responses for row in (r, *r.get(SEGMENTS, ()))]
    for number, sample in enumerate(samples):
        sample.info["row"] = torch.tensor([number])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    buffer = NaiveReplayBuffer(2, cpu_offload=False)
    for sample in samples:
        buffer.append(sample)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    seen: list[tuple[list[int], float]] = []

    def training_step(experience, kl_ctl, step, loss_batch_info=None):
        seen.append(([int(row) for row in experience.info["row"]], float(loss_batch_info["batch_num_tokens"])))
        return {"metrics": {"policy_loss": torch.tensor(0.0)}, "weights": {"policy_loss": "token"},
                "num_action_tokens": 1.0, "num_samples": 1.0}

    strategy = SimpleNamespace(ring_attn_group=None, accumulated_gradient=4, world_size=1, is_rank_0=lambda: True,
                               all_reduce=lambda data, op="mean": data)
    args = SimpleNamespace(train=SimpleNamespace(dynamic_batch_enable=False),
                           ds=SimpleNamespace(tensor_parallel_size=1))
    trainer = ActorPPOTrainer.__new__(ActorPPOTrainer)
    trainer.__dict__.update(args=args, strategy=strategy, replay_buffer=buffer, dataloader_pin_memory=False,
                            max_epochs=2, training_step=training_step)
    tokens = sum(int(sample.action_mask.sum()) for sample in samples)

    ppo_train_method(ActorPPOTrainer.ppo_train)(trainer, 0.0)
    assert trainer.replay_buffer is buffer
    for epoch in (seen[:4], seen[4:]):
        assert len(epoch) == 4, "the four micro-batches of one optimizer step"
        assert sorted(row for rows, _ in epoch for row in rows) == list(range(len(samples)))
        assert {norm for _, norm in epoch} == {tokens / 4}, "one window's normalisers over every row's tokens"

    seen.clear()
    ActorPPOTrainer.ppo_train(trainer, 0.0)
    windows = {norm for _, norm in seen}
    assert len(seen) > 8 and len(windows) > 1, "OpenRLHF alone would take the extra rows as further optimizer steps"
