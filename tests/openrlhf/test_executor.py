"""The shipped agent and reward files inside OpenRLHF's own rollout code, on a FakeLLMEngine.

OpenRLHF loads the files by path (``_load_agent_executor``, ``SingleTurnAgentExecutor``), its
``RolloutRayActor.generate_responses`` runs the executor, and ``SamplesGenerator`` turns each
response into the ``Experience`` the trainer sees.
"""

from __future__ import annotations

import json
import pickle
from types import SimpleNamespace

import torch
from conftest import HACK, MAX_LEN, SOLVE, STALL, FakeLLMEngine, engine_spans, experience_of, rollout, rollout_params
from openrlhf.utils.agent import SingleTurnAgentExecutor
from typer.testing import CliRunner
from vllm import SamplingParams

from agentrl_plugins.cli import build_app
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import load_recipe

from agentrl_openrlhf.dataset import dataset_rows
from agentrl_openrlhf.shipped import AGENT_EXECUTOR, REWARD_FUNC
from agentrl_openrlhf.turn_label import TurnLabel


async def test_the_action_mask_covers_exactly_the_policy_tokens(use_recipe, model, tokenizer):
    use_recipe()
    engine = FakeLLMEngine(model, tokenizer, {"clamp": [SOLVE, HACK, STALL, SOLVE]})
    responses = await rollout(engine, tokenizer, "clamp", 4) + await rollout(engine, tokenizer, "span", 2)
    assert [r["reward"] for r in responses[:4]] == [1.0, 0.0, 0.0, 1.0]
    assert [r["extra_logs"]["hacked"] for r in responses[:4]] == [0.0, 1.0, 0.0, 0.0]
    for response in responses:
        experience = experience_of(response)
        tokens = response["observation_tokens"]
        spans = engine_spans(engine, tokens)
        assert spans, "every episode starts with a generation"
        filtered = response["extra_logs"]["termination_submitted"] == 0.0
        assert response["action_ranges"] == ([] if filtered else sorted(spans))
        policy = torch.zeros(len(tokens), dtype=torch.bool)
        for start, end in response["action_ranges"]:
            policy[start:end] = True
        assert torch.equal(experience.action_mask[0], policy[1:])
        assert torch.equal(experience.sequences[0], torch.tensor(tokens))
        sampled = [lp for _, logprobs in sorted(spans.items()) for lp in logprobs]
        rollout_lp = torch.tensor(response["rollout_log_probs"])
        on = torch.zeros(len(tokens), dtype=torch.bool)
        for start, end in spans:
            on[start:end] = True
        assert torch.allclose(rollout_lp[on], torch.tensor(sampled)) and (rollout_lp[~on] == 0).all()
        assert torch.equal(experience.rollout_log_probs[0], rollout_lp[1:])
        assert experience.rewards.item() == response["reward"]
    stalled = responses[2]
    assert stalled["extra_logs"]["termination_max_turns"] == 1.0 and experience_of(stalled).action_mask.sum() == 0


async def test_for_a_turn_level_estimator_each_label_carries_its_turns_over_the_action_mask(use_recipe, model,
                                                                                              tokenizer):
    use_recipe({"advantage.estimator": "gigpo", "filtering.compact": False})
    engine = FakeLLMEngine(model, tokenizer, {"clamp": [SOLVE, HACK, STALL, SOLVE]})
    responses = await rollout(engine, tokenizer, "clamp", 4)
    for response in responses:
        experience = experience_of(response)
        (label,) = experience.labels
        assert isinstance(label, TurnLabel) and label == "clamp", "OpenRLHF sees the task id"
        assert label.turns.covers(experience.action_mask[0].tolist())
        assert label.turns.turns[0].state is not None, "the anchor states travel with the turns"
        moved = pickle.loads(pickle.dumps(label))
        assert moved == "clamp" and moved.turns == label.turns, "Ray moves the label between processes whole"
        assert response["extra_logs"]["policy_tokens"] == experience.action_mask.sum().item()
    logs = [r["extra_logs"] for r in responses]
    assert [log["redundant_turns"] for log in logs[:2] + logs[3:]] == [0.0] * 3
    assert logs[2]["redundant_turns"] == logs[2]["num_turns"] - 1 > 0, "the stall re-tests an unchanged source"
    assert all(log["drift"] == 0.0 for log in logs), "the episode runner's episodes never drift (agent programs may)"


async def test_without_compact_filtering_every_episode_keeps_its_tokens(use_recipe, model, tokenizer):
    use_recipe({"filtering.compact": False})
    engine = FakeLLMEngine(model, tokenizer, {"clamp": [STALL]})
    responses = await rollout(engine, tokenizer, "clamp", 2)
    for response in responses:
        assert response["extra_logs"]["termination_max_turns"] == 1.0
        assert response["action_ranges"] == sorted(engine_spans(engine, response["observation_tokens"]))


async def test_sampling_and_limits_reach_the_engine(use_recipe, model, tokenizer):
    recipe = use_recipe({"rollout.max_new_tokens_per_turn": 5, "rollout.max_turns": 2})
    engine = FakeLLMEngine(model, tokenizer)
    calls = []

    async def spy(prompt_token_ids, sampling_params, multi_modal_data=None):
        calls.append(sampling_params)
        return await engine.generate(prompt_token_ids, sampling_params)

    (response,) = await rollout(SimpleNamespace(generate=spy), tokenizer, "midpoint", 1)
    assert 1 <= len(calls) <= recipe.rollout.max_turns
    assert all(isinstance(p, SamplingParams) and p.logprobs == 1 and p.max_tokens <= 5 and p.min_tokens == 1
               and p.temperature == 1.0 and not p.skip_special_tokens for p in calls)
    assert len(response["observation_tokens"]) <= MAX_LEN


async def test_the_reward_file_scores_single_turn_completions(use_recipe, model, tokenizer):
    use_recipe()
    engine = FakeLLMEngine(model, tokenizer, {"clamp": [["<tool>edit swap_minmax</tool>\n<tool>submit</tool>"],
                                                         ["<tool>edit hardcode_tests</tool>\n<tool>submit</tool>"],
                                                         ["<tool>read</tool>"]]})
    executor = SingleTurnAgentExecutor([str(REWARD_FUNC)])
    row = next(r for r in dataset_rows(get_plugin_manager().get("environment", "bugfix").factory(), use_recipe(),
                                       "train") if r["label"] == "clamp")
    prompt = tokenizer.apply_chat_template(row["messages"], tokenize=False, add_generation_prompt=True)
    params = rollout_params()
    params.max_tokens = 64
    outputs = [await executor.execute(prompt, "clamp", params, MAX_LEN, tokenizer, engine) for _ in range(3)]
    assert [float(o["reward"]) for o in outputs] == [1.0, 0.0, 0.0]
    assert [o["extra_logs"]["hacked"].item() for o in outputs] == [0.0, 1.0, 0.0]


def test_paths_and_dataset_commands(tmp_path):
    app = build_app()
    shown = CliRunner().invoke(app, ["openrlhf", "paths", "--json"])
    assert shown.exit_code == 0, shown.output
    paths = json.loads(shown.output)
    assert paths["train.agent_func_path"] == str(AGENT_EXECUTOR) and AGENT_EXECUTOR.is_file()
    assert paths["reward.remote_url"] == str(REWARD_FUNC) and REWARD_FUNC.is_file()
    out = tmp_path / "prompts.jsonl"
    written = CliRunner().invoke(app, ["openrlhf", "dataset", str(out), "--recipe", "deepswe_grpopp"])
    assert written.exit_code == 0, written.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    recipe = load_recipe("deepswe_grpopp", profile="laptop")
    train = {task.id for task in get_plugin_manager().get("environment", "bugfix").factory(**recipe.environment.options)
             .tasks("train")}
    assert len(train) > 12, "the laptop profile's options (renamed variants) are honoured"
    assert len(rows) == recipe.train.steps * recipe.rollout.tasks_per_step and {r["label"] for r in rows} == train
    assert all(r["messages"][1]["content"] == r["prompt"] and r["datasource"] == r["label"] for r in rows)


async def test_evaluation_sampling_comes_from_openrlhf(use_recipe, model, tokenizer):
    use_recipe()
    seen = []
    engine = FakeLLMEngine(model, tokenizer, {"clamp": [SOLVE]})

    async def spy(prompt_token_ids, sampling_params, multi_modal_data=None):
        seen.append(sampling_params.temperature)
        return await engine.generate(prompt_token_ids, sampling_params)

    await rollout(SimpleNamespace(generate=spy), tokenizer, "clamp", 1, temperature=0.6)
    assert seen and set(seen) == {0.6}
