"""The warm start: cached, deterministic, played through the real episode runner, with room left for RL."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import Qwen2ForCausalLM

from agentrl_plugins.episode import run_episode, run_episodes
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits

from agentrl_tinyagent import WarmStartSettings, load_tinyagent, pass_at_1, warm_start, warmstart
from bugfix_gym import policies
from bugfix_gym.grammar import parse_call
from bugfix_gym.verifiers import hidden_tests

QUICK = WarmStartSettings(max_steps=3, batch_size=2)


def no_training(*args, **kwargs):
    raise AssertionError("the warm start was trained again instead of read from the cache")


def test_second_call_is_a_cache_hit(warm_cache, monkeypatch):
    monkeypatch.setattr(warmstart, "_train", no_training)
    path = warm_start(seed=0, cache_dir=warm_cache)
    assert path.name.startswith("tinyagent-seed0-") and (path / "config.json").exists()
    monkeypatch.setenv("AGENTRL_CACHE", str(warm_cache.parent))
    model, tokenizer = load_tinyagent(seed=0)
    assert isinstance(model, Qwen2ForCausalLM) and model.dtype == torch.float32
    assert model.config._attn_implementation == "sdpa" and len(tokenizer) == model.config.vocab_size


def test_same_seed_gives_identical_weights(tmp_path):
    first = warm_start(seed=7, cache_dir=tmp_path / "a", settings=QUICK, log=lambda line: None)
    second = warm_start(seed=7, cache_dir=tmp_path / "b", settings=QUICK, log=lambda line: None)
    other = warm_start(seed=8, cache_dir=tmp_path / "a", settings=QUICK, log=lambda line: None)
    assert first.name == second.name != other.name
    a, b, c = (Qwen2ForCausalLM.from_pretrained(path).state_dict() for path in (first, second, other))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[key], b[key]) for key in a)
    assert not all(torch.equal(a[key], c[key]) for key in a)


@pytest.fixture(scope="module")
def played(tokenizer):
    """The curriculum's families and plays, and the rows they give."""
    families, plays = warmstart.curriculum(QUICK, seed=0)
    return families, plays, warmstart.transcripts(tokenizer, QUICK, seed=0)


def test_transcripts_train_only_on_assistant_tokens(tokenizer, played):
    _, plays, rows = played
    assert len(rows) == len(plays)
    assistant = tokenizer.convert_tokens_to_ids("<|assistant|>")
    for row in rows:
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert len(ids) == len(mask) and mask[0] == 0
        starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
        ends = [i for i in range(1, len(mask)) if mask[i - 1] and (i == len(mask) or not mask[i])]
        ends += [len(mask)] if mask[-1] else []
        assert len(starts) == len(ends) >= 1
        assert all(ids[start - 1] == assistant for start in starts)
        assert all(ids[end - 1] == tokenizer.eos_token_id for end in ends)


def test_variants_are_first_turn_rows_whose_one_reply_names_a_menu_op(tokenizer, played):
    families, plays, rows = played
    by_name = {family.name: family for family in families}
    first_turn = [(play, row) for play, row in zip(plays, rows) if play.first_turn_only]
    assert len(first_turn) == 12 * (QUICK.renamed + QUICK.renamed_hacker)
    assert all("~" in play.family for play, _ in first_turn)
    hacks = 0
    for play, row in first_turn:
        mask = row["assistant_masks"]
        reply = tokenizer.decode([t for t, bit in zip(row["input_ids"], mask) if bit], skip_special_tokens=True)
        assert row["input_ids"][-1] == tokenizer.eos_token_id and mask[-1] == 1
        assert sum(1 for i in range(1, len(mask)) if mask[i] and not mask[i - 1]) == 1
        op = parse_call(reply)[1]
        family = by_name[play.family]
        assert op in (family.op_names[0], "hardcode_tests") and family.op(op) is not None
        hacks += op == "hardcode_tests"
    assert hacks == 12 * QUICK.renamed_hacker


async def test_episode_runner_end_to_end_keeps_the_sampler_ids(warm, gym):
    model, tokenizer = warm
    sampler = HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=0)
    calls = []

    async def recording(token_ids, sampling):
        out = await sampler(token_ids, sampling)
        calls.append((list(token_ids), out))
        return out

    task = gym.tasks("held_out")[0]
    trajectory = await run_episode(gym, task, recording, tokenizer, Limits(6, 2048, 16), verifier=hidden_tests)
    assert trajectory.termination in ("submitted", "max_turns")
    assert [call[0] for call in calls][0] == trajectory.prompt_ids
    sampled, logprobs = [], []
    for prompt, out in calls:
        assert trajectory.token_ids[: len(prompt)] == prompt
        sampled += out.token_ids
        logprobs += out.logprobs
    policy = [t for t, bit in zip(trajectory.response_ids, trajectory.response_mask) if bit]
    assert policy == sampled
    assert [lp for lp, bit in zip(trajectory.logprobs, trajectory.response_mask) if bit] == logprobs
    assert sum(parse_call(m["content"]) is not None for m in trajectory.messages if m["role"] == "assistant") >= 1


async def test_a_step_of_concurrent_episodes_batches_its_turns(warm, gym):
    model, tokenizer = warm
    sampler = HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=0)
    limits = Limits(6, 2048, 16)
    played = await run_episodes(gym, gym.tasks("held_out"), sampler, tokenizer, limits, group_size=8,
                                verifier=hidden_tests)
    turns = sum(len(t.turn_spans) for t in played)
    print(f"{len(played)} episodes, {turns} turns: {sampler.forward_passes} forward passes in "
          f"{sampler.batches} batches")
    assert sampler.forward_passes <= limits.max_turns * limits.max_new_tokens_per_turn * 2
    assert sampler.batches < turns / 4


def test_starting_pass_rates_leave_room_for_rl(warm):
    model, tokenizer = warm
    held_out = pass_at_1(model, tokenizer, "held_out", episodes_per_family=16)
    train = pass_at_1(model, tokenizer, "train", episodes_per_family=16)
    print(f"starting pass@1: train {train:.3f}, held-out {held_out:.3f}")
    assert 0.1 <= held_out <= 0.6
    assert 0.1 <= train <= 0.7


async def test_it_reads_the_fix_off_an_unseen_menu(warm, gym):
    """The skill that carries to held-out families: at the first edit slot, the first op of the menu.

    The warm start plays the exploit in about 40% of its first moves on purpose, so the skill is measured
    among the other ops: P(fix) / (1 - P(hardcode_tests)), 1 in 7 by chance.
    """
    model, tokenizer = warm
    edit = tokenizer.convert_tokens_to_ids("edit ")
    exploit = tokenizer.convert_tokens_to_ids("hardcode_tests")
    probabilities = []
    for task in gym.tasks("held_out"):
        family = gym.family(task.family)
        played = await run_episode(gym, task, ScriptedGenerate(policies.fixer(family), tokenizer), tokenizer,
                                   Limits(6, 2048, 16), verifier=hidden_tests)
        slot = len(played.prompt_ids) + played.response_ids.index(edit)
        with torch.no_grad():
            logits = model(torch.tensor([played.token_ids[: slot + 1]])).logits[0, -1]
        probs = logits.softmax(-1)
        fix = tokenizer.convert_tokens_to_ids(family.fix_op.name)
        probabilities.append((probs[fix] / (1 - probs[exploit])).item())
    mean = sum(probabilities) / len(probabilities)
    print(f"P(fix op | not the exploit) at the first edit slot of held-out menus: {mean:.3f} (chance 1/7)")
    assert mean > 0.6


def test_building_needs_trl(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def without_trl(name, *args, **kwargs):
        if name == "trl" or name.startswith("trl."):
            raise ImportError("No module named 'trl'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_trl)
    with pytest.raises(warmstart.AgentRLError, match="needs TRL"):
        warm_start(seed=0, cache_dir=tmp_path, settings=QUICK, log=lambda line: None)


def test_pass_at_1_runs_inside_an_event_loop(random_model, tokenizer):
    async def inside() -> float:
        return pass_at_1(random_model, tokenizer, "held_out", episodes_per_family=1,
                         limits=Limits(max_turns=1, max_new_tokens_per_turn=2))

    assert asyncio.run(inside()) == 0.0
