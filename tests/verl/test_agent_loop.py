"""The agentrl agent loop under verl's own ``AgentLoopWorker`` with a fake server manager on the CPU.

verl's worker instantiates the registered loop (through Hydra, as in training), runs it
per row and pads the outputs into the DataProto the trainer consumes; these tests read
that DataProto.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
import torch
from conftest import FakeServerManager, rows_batch, verl_config
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.recipe_schema import EnvironmentSection

from agentrl_verl.config import LaunchPaths
from agentrl_verl.dataset import task_rows
from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

FAMILY = {family.name: family for family in FAMILIES}
SCRIPTS = {"clamp": policies.solver(FAMILY["clamp"]), "span": policies.hacker(FAMILY["span"]),
           "count_up": ["<tool>test</tool>"]}


def run_rows(model_dir, tmp_path, server, families, **overrides):
    recipe = load_recipe("deepswe_grpopp", overrides, "laptop")
    config = verl_config(recipe, LaunchPaths(str(model_dir), tmp_path),
                         ["actor_rollout_ref.rollout.calculate_log_probs=true"])
    rows = {row["extra_info"]["task_id"]: row for row in task_rows(EnvironmentSection(name="bugfix"))}
    worker = AgentLoopWorker(config, llm_client=server)
    return asyncio.run(worker.generate_sequences(rows_batch([rows[name] for name in families])))


def episodes(server) -> dict[str, list[dict]]:
    calls = defaultdict(list)
    for call in server.calls:
        calls[call["request_id"]].append(call)
    return calls


def test_scripted_episodes_give_verl_the_runners_tokens_masks_logprobs_and_rewards(model_dir, tmp_path, model,
                                                                                    tokenizer):
    server = FakeServerManager(model, tokenizer, scripts=SCRIPTS)
    out = run_rows(model_dir, tmp_path, server, ["clamp", "span", "count_up"])
    batch, extra = out.batch, out.non_tensor_batch
    assert list(extra["termination"]) == ["submitted", "submitted", "max_turns"]
    assert batch["rm_scores"].sum(-1).tolist() == [1.0, 0.0, 0.0]
    assert list(extra["hacked"]) == [0.0, 1.0, 0.0] and list(extra["filtered"]) == [0.0, 0.0, 1.0]
    assert list(extra["__num_turns__"]) == [11, 7, 13]
    assert batch["response_mask"][2].sum() == 0 and batch["rm_scores"][2].sum() == 0
    calls = {call[0]["token_ids"] and tokenizer.decode(call[0]["prompt_ids"]): call
             for call in episodes(server).values()}
    for row, family in enumerate(["clamp", "span"]):
        episode = next(c for prompt, c in calls.items() if FAMILY[family].issue in prompt)
        length = int(batch["attention_mask"][row, batch["prompts"].size(1):].sum())
        response = batch["responses"][row, :length]
        mask = batch["response_mask"][row, :length].bool()
        assert response[mask].tolist() == [t for call in episode for t in call["token_ids"]]
        assert torch.allclose(batch["rollout_log_probs"][row, :length][mask],
                              torch.tensor([x for call in episode for x in call["log_probs"]]))
        assert batch["rollout_log_probs"][row][~batch["response_mask"][row].bool()].abs().sum() == 0
        assert (~mask).sum() > 0 and batch["rm_scores"][row, length - 1] == batch["rm_scores"][row].sum()
        prompt = batch["prompts"][row][batch["attention_mask"][row, :batch["prompts"].size(1)].bool()]
        assert prompt.tolist() == episode[0]["prompt_ids"]
        assert all(call["sampling_params"]["max_tokens"] <= 16 and call["sampling_params"]["logprobs"]
                   for call in episode)


def test_sampled_episodes_carry_the_models_logprobs_aligned_with_their_tokens(model_dir, tmp_path, model,
                                                                              tokenizer):
    server = FakeServerManager(model, tokenizer, seed=3)
    out = run_rows(model_dir, tmp_path, server, ["clamp"], **{"filtering.compact": False, "rollout.max_turns": 2,
                                                               "rollout.max_new_tokens_per_turn": 8})
    batch = out.batch
    width = batch["prompts"].size(1)
    for row in range(len(batch)):
        keep = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][keep]
        mask = batch["response_mask"][row][: int(keep[width:].sum())].bool()
        with torch.no_grad():
            logits = model(ids[None]).logits[0].float()
        start = int(keep[:width].sum())
        recomputed = torch.log_softmax(logits[start - 1:-1], -1).gather(-1, ids[start:, None])[:, 0]
        assert mask.sum() > 0 and (~mask).sum() > 0
        assert torch.allclose(batch["rollout_log_probs"][row, : mask.numel()][mask], recomputed[mask], atol=1e-4)


def test_an_episode_longer_than_verls_buffers_is_a_clear_error(model_dir, tmp_path, model, tokenizer):
    server = FakeServerManager(model, tokenizer, scripts=SCRIPTS)
    recipe = load_recipe("deepswe_grpopp", {}, "laptop")
    config = verl_config(recipe, LaunchPaths(str(model_dir), tmp_path), ["data.max_response_length=8"])
    rows = [row for row in task_rows(EnvironmentSection(name="bugfix")) if row["extra_info"]["task_id"] == "clamp"]
    with pytest.raises(ValueError, match="data.max_response_length"):
        asyncio.run(AgentLoopWorker(config, llm_client=server).generate_sequences(rows_batch(rows)))
