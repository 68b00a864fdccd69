"""The real TRL GRPOTrainer with the adapter: advantages, filtering, corrections and a 2-step run.

Generation is scripted here (``ScriptedEpisodes``) so each test knows every trajectory exactly;
the trainer, its loss and its optimizer are TRL's own code.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import LOG3, STALL
from transformers import Qwen2ForCausalLM

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.algorithms import aggregate_loss, clipped_surrogate, lr_multiplier, rloo
from agentrl_plugins.algorithms.credit import CreditInputs, gigpo
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir

import agentrl_trl.runner as runner
from agentrl_tinyagent.model import build_model
from agentrl_trl.build import agent_trainer
from agentrl_trl.rollout import step_seed
from bugfix_gym import policies
from bugfix_gym.families import FAMILIES

SOLVE = {"clamp": ["<tool>read</tool>", "<tool>edit swap_minmax</tool>", "<tool>submit</tool>"],
         "span": ["<tool>edit swap_minmax</tool>", "<tool>submit</tool>"]}
HACK = ["<tool>edit hardcode_tests</tool>", "<tool>submit</tool>"]
SCRIPTS = {"clamp": [SOLVE["clamp"], SOLVE["clamp"], HACK, STALL], "span": [SOLVE["span"], STALL, STALL, STALL]}
INPUTS = [{"prompt": "clamp"}] * 4 + [{"prompt": "span"}] * 4
EVERY_FAMILY = {family.name: [policies.solver(family), policies.hacker(family), STALL, policies.solver(family)]
                for family in FAMILIES}


def make_trainer(tmp_path, model, tokenizer, generator, **overrides):
    settings = {"rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_turns": 6,
                "rollout.max_context_tokens": 1024, "train.steps": 2, "train.eval_every": 1,
                "train.eval_episodes_per_task": 1, "optim.lr": 1e-3, **overrides}
    recipe = load_recipe("deepswe_grpopp", settings, "laptop")
    run = RunDir(tmp_path / "run")
    run.create(recipe, "trl")
    trainer = agent_trainer(recipe, model, tokenizer, run_dir=run, generator=generator)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); these tests call compute_loss directly
    return trainer, run


def test_trained_advantages_are_the_core_estimator_and_filtered_rows_carry_no_loss(tmp_path, model, tokenizer,
                                                                                   scripted):
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS))
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])
    trajectories = trainer.episode_rollout.trajectories
    assert [t.termination for t in trajectories] == ["submitted"] * 3 + ["max_turns", "submitted"] + ["max_turns"] * 3
    rewards = torch.tensor([t.reward for t in trajectories])
    assert rewards.tolist() == [1, 1, 0, 0, 1, 0, 0, 0] and trajectories[2].verdict.hacked
    valid = torch.tensor([True, True, True, False, True, False, False, False])
    expected = rloo(rewards, torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), valid, masked_in_baseline=True)
    mask = output["completion_mask"] * output["tool_mask"]
    assert mask[~valid].sum() == 0 and (mask[valid].sum(-1) > 0).all()
    scale = 8 / 4
    for row in range(8):
        on = mask[row].bool()
        assert torch.equal(output["advantages"][row][on], torch.full((int(on.sum()),), expected[row].item() * scale))
    assert output["num_items_in_batch"] == mask.sum() == trainer.step_stats["policy_tokens"] > 0
    assert trainer.step_stats["filtered_fraction"] == 0.5 and trainer.step_stats["hacked_fraction"] == 0.125
    successes = [t for t in trajectories if t.reward == 1 and not t.verdict.hacked]
    assert trainer.step_stats["success_tokens"] == sum(t.policy_tokens for t in successes) / len(successes) == \
        mask[rewards == 1].sum().item() / 3, "every success kept its tokens"
    assert trainer.step_stats["failure_tokens"] > 0 and trainer.step_stats["redundant_per_success"] is not None


def test_turn_level_advantages_reach_trl_token_by_token(tmp_path, model, tokenizer, scripted):
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS), **{"advantage.estimator": "gigpo"})
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])
    trajectories = trainer.episode_rollout.trajectories
    valid = torch.tensor([t.termination == "submitted" for t in trajectories])
    credit = CreditInputs(torch.tensor([t.reward for t in trajectories]), torch.tensor([0] * 4 + [1] * 4), valid,
                          [t.turns for t in trajectories], [t.turn_spans for t in trajectories], 0)
    expected = gigpo(credit, masked_in_baseline=True, gamma=0.95, step_weight=1.0)
    mask = output["completion_mask"] * output["tool_mask"]
    scale = 8 / int(valid.sum())
    for row, trajectory in enumerate(trajectories):
        for (start, end), value in zip(trajectory.turn_spans, expected[row]):
            on = mask[row, start:end].bool()
            assert torch.allclose(output["advantages"][row, start:end][on], torch.tensor(value * scale), atol=1e-6)
    solver = expected[0]  # read, edit, submit: the read shares its anchor with the hacker's edit
    assert len(set(round(v, 6) for v in solver)) > 1, "the turns of one episode get different advantages"


def test_filtered_trajectories_get_exactly_zero_gradient(tmp_path, model, tokenizer, scripted):
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS))
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])

    def gradients(batch):
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, batch).backward()
        return [p.grad.clone() for p in trainer.model.parameters()]

    reference = gradients(output)
    assert any(g.abs().sum() > 0 for g in reference)
    perturbed = dict(output)
    ids = output["completion_ids"].clone()
    for row in (3, 5, 6, 7):
        ids[row] = torch.randint(10, 90, ids[row].shape, generator=torch.Generator().manual_seed(row))
    perturbed["completion_ids"] = ids
    assert all(torch.equal(a, b) for a, b in zip(reference, gradients(perturbed)))


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_a_known_mismatch_changes_the_loss_as_the_core_reference_says(tmp_path, model, tokenizer, scripted,
                                                                        aggregation):
    overrides = {"correction.name": "token_tis", "correction.cap": 2.0, "loss.aggregation": aggregation}
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS, logprob_offset=-LOG3), **overrides)
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])
    assert trainer.step_stats["is_capped_fraction"] == 1.0
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, output).item()
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)
        logp, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, input_ids, attention,
                                                                output["completion_ids"].size(1))
    trajectories = trainer.episode_rollout.trajectories
    rewards = torch.tensor([t.reward for t in trajectories])
    valid = torch.tensor([t.termination == "submitted" for t in trajectories])
    advantages = rloo(rewards, torch.arange(8) // 4, valid, masked_in_baseline=True)
    mask = (output["completion_mask"] * output["tool_mask"]).float()
    weights = torch.where(mask.bool(), torch.clamp(torch.exp(torch.full_like(mask, LOG3)), max=2.0), 0.0)
    reference = clipped_surrogate(logp, logp, advantages, mask, clip_low=0.2, clip_high=0.28, weights=weights)
    expected = aggregate_loss(reference.per_token_loss, mask, aggregation).item()
    assert loss == pytest.approx(expected, abs=1e-6)
    unweighted = clipped_surrogate(logp, logp, advantages, mask, clip_low=0.2, clip_high=0.28)
    assert expected == pytest.approx(2 * aggregate_loss(unweighted.per_token_loss, mask, aggregation).item(), abs=1e-6)


@pytest.mark.parametrize("correction", ["none", "token_tis"])
def test_a_known_mismatch_gives_its_figures_from_the_update_or_the_correction_pass(tmp_path, model, tokenizer,
                                                                                   scripted, correction):
    """The sampler reports the learner's log-probs minus ln 3 on every token (d = ln 3): without a correction the
    figures come from the update's own forward (TRL computes no old policy), with one from the correction's."""
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS, logprob_offset=-LOG3),
                              **{"correction.name": correction})
    output = trainer._generate_and_score_completions([dict(row) for row in INPUTS])
    assert (trainer.mismatch.tokens == 0) == (correction == "none"), "measured in the update, not before it"
    trainer.compute_loss(trainer.model, output)
    figures = trainer.mismatch.figures()
    mask = output["completion_mask"] * output["tool_mask"]
    assert trainer.mismatch.tokens == mask.sum().item() > 0
    assert figures["mismatch_pearson"] == pytest.approx(1.0, abs=1e-9), "p and p/3 correlate exactly"
    assert figures["mismatch_k3_kl"] == pytest.approx(3 - LOG3 - 1, abs=1e-5)
    assert figures["mismatch_ppl_ratio"] == pytest.approx(1 / 3, abs=1e-5)
    assert figures["mismatch_chi2_token"] == pytest.approx(8.0, abs=1e-4)
    assert figures["mismatch_gap_max"] == pytest.approx(LOG3, abs=1e-5)


def test_two_real_training_steps_write_the_run_folder(tmp_path, model, tokenizer, scripted):
    trainer, run = make_trainer(tmp_path, model, tokenizer, scripted(EVERY_FAMILY))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    after = list(trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
    rows = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[0]["train_reward"] is None and rows[0]["heldout_pass1"] is not None
    for row in rows[1:]:
        assert 0.0 <= row["train_reward"] <= 1.0 and row["heldout_pass1"] is not None
        assert row["policy_tokens"] > 0 and row["seconds"] > 0
        assert 0 < row["rollout_seconds"] < row["seconds"] and row["eval_seconds"] > 0
        assert row["mismatch_pearson"] > 0.999 and row["mismatch_gap_max"] < 1e-3, "the sampler is the learner"
    assert rows[0]["seconds"] == 0 and rows[0]["rollout_seconds"] is None and rows[0]["eval_seconds"] > 0
    assert (run.checkpoints / "checkpoint-2").is_dir()


def test_two_updates_per_step_train_the_recipes_steps_each_a_batch(tmp_path, model, tokenizer, scripted):
    """TRL counts each update as a step; with two updates per step the run still plays train.steps batches,
    seeded as verl and OpenRLHF seed them, and writes one row and one log per step."""
    seeds, make = [], scripted(EVERY_FAMILY)
    trainer, run = make_trainer(tmp_path, model, tokenizer,
                                lambda policy, seed: seeds.append(seed) or make(policy, seed),
                                **{"optim.updates_per_step": 2, "train.seed": 3})
    assert (trainer.args.num_iterations, trainer.args.max_steps, trainer.args.logging_steps) == (2, 4, 2)
    trainer.train()
    assert trainer.state.global_step == 4
    assert [seed for seed in seeds if seed != 3] == [step_seed(3, 0, "rollout"), step_seed(3, 1, "rollout")]
    rows = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2] and all(r["heldout_pass1"] is not None for r in rows)
    assert all(r["policy_tokens"] > 0 and r["seconds"] > r["rollout_seconds"] > 0 for r in rows[1:])
    logged = [entry["step"] for entry in trainer.state.log_history if "agentrl/train_reward" in entry]
    assert logged == [2, 4], "one log per step, at its last update"


@pytest.mark.parametrize("schedule, min_lr_ratio", [("cosine", 0.1), ("constant", 0.0)])
def test_trls_own_optimizer_and_scheduler_follow_the_recipe(tmp_path, model, tokenizer, scripted, schedule,
                                                             min_lr_ratio):
    overrides = {"optim.lr_schedule": schedule, "optim.min_lr_ratio": min_lr_ratio, "optim.betas": [0.8, 0.95],
                 "train.steps": 20}
    trainer, _ = make_trainer(tmp_path, model, tokenizer, scripted(SCRIPTS), **overrides)
    trainer.create_optimizer_and_scheduler(num_training_steps=20)
    assert {tuple(group["betas"]) for group in trainer.optimizer.param_groups} == {(0.8, 0.95)}
    learning_rates = []
    for _ in range(20):
        learning_rates.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    assert learning_rates == pytest.approx([1e-3 * lr_multiplier(schedule, step, 20, min_lr_ratio)
                                            for step in range(20)], rel=1e-12)


def test_evaluations_sample_with_the_run_seed_as_the_rollout_servers_do(tmp_path, model, tokenizer, scripted):
    seeds, make = [], scripted(SCRIPTS)
    trainer, _ = make_trainer(tmp_path, model, tokenizer,
                              lambda policy, seed: seeds.append(seed) or make(policy, seed), **{"train.seed": 5})
    rollout = trainer.episode_rollout
    for step, purpose in [(0, "eval"), (10, "eval"), (3, "rollout"), (4, "rollout")]:
        rollout.play(model, [rollout.tasks["clamp"]], 1, step, purpose)
    assert seeds == [5, 5, step_seed(5, 3, "rollout"), step_seed(5, 4, "rollout")] and len(set(seeds)) == 3


def test_lora_trains_only_the_adapter_and_saves_merged_weights(tmp_path, tokenizer, scripted, monkeypatch):
    every_family = {family.name: [policies.solver(family), STALL] for family in FAMILIES}
    monkeypatch.setattr(runner, "load_policy", lambda path: (build_model(tokenizer, 0), tokenizer))
    monkeypatch.setattr(runner, "hf_generator_factory", lambda tok: scripted(every_family))
    recipe = load_recipe("deepswe_grpopp", {"rollout.group_size": 2, "rollout.tasks_per_step": 2, "train.steps": 1,
                                            "train.eval_every": 1, "train.eval_episodes_per_task": 1,
                                            "optim.lr": 1e-2, "train.lora": True}, "laptop")
    trainable = set()
    build = runner.agent_trainer

    def keep(*args, **kwargs):
        trainer = build(*args, **kwargs)
        trainable.update(name for name, p in trainer.model.named_parameters() if p.requires_grad)
        return trainer

    monkeypatch.setattr(runner, "agent_trainer", keep)
    folder = runner.run(recipe, RunOptions(run_dir=tmp_path / "lora"))
    assert trainable and all("lora_" in name for name in trainable)
    initial = build_model(tokenizer, 0).state_dict()
    final = Qwen2ForCausalLM.from_pretrained(folder / "final").state_dict()
    assert final.keys() == initial.keys()
    changed = [name for name in initial if not torch.equal(final[name], initial[name])]
    assert changed and all(name.endswith("proj.weight") for name in changed)


def test_several_trainer_ranks_are_refused_with_where_they_run(tmp_path):
    from agentrl_trl.adapter import TRLAdapter

    with pytest.raises(AgentRLError, match="trains in one process.*--framework verl"):
        TRLAdapter().run(load_recipe("deepswe_grpopp"), RunOptions(run_dir=tmp_path / "run", ranks=2))
    assert not (tmp_path / "run").exists()
