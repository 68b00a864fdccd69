"""``agentrl compare --parity`` in the core: the recorded batch, its file format, the table, the runner's errors."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.cli import build_app
from agentrl_plugins.compare.batch import (
    VERSION,
    ByDesign,
    ParityBatch,
    ParityFormatError,
    ParityResult,
    read_input,
    read_result,
    write_input,
    write_result,
)
from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.reference import reference
from agentrl_plugins.compare.report import ParityRun, write_report
from agentrl_plugins.compare.runner import FrameworkEnv, FrameworkEnvError, find_env, run_side
from agentrl_plugins.compare.table import QUANTITIES, markdown, parity_table
from agentrl_plugins.errors import AgentRLError, RecipeError, UnknownNameError
from agentrl_plugins.recipe import apply_overrides, load_recipe
from agentrl_plugins.runs.figures import FIGURES

RECIPE = load_recipe("deepswe_grpopp")


@pytest.fixture(scope="module")
def batch():
    return record_batch(RECIPE, seed=0)


def as_framework(result: ParityResult, name: str, by_design=()) -> ParityResult:
    return ParityResult(name, result.advantages, result.weights, result.loss, result.gradient,
                        by_design=list(by_design), figures=dict(result.figures))


def test_the_recorded_batch_has_every_case_parity_needs(batch):
    size = RECIPE.rollout.group_size
    lengths = batch.response_mask.sum(-1)
    groups = batch.rewards.view(-1, size)
    assert groups.size(0) == 4 and len(set(lengths.tolist())) > 5
    assert (groups == groups[:, :1]).all(1).sum() == 1 and ((groups > 0).any(1) & (groups < 1).any(1)).sum() == 3
    assert {"max_turns", "max_context", "submitted"} <= set(batch.terminations) and batch.hacked.any()
    on = batch.response_mask.bool()
    mismatch = (batch.old_logprobs - batch.sampler_logprobs)[on]
    assert mismatch.abs().max() > 1.0 and mismatch.abs().min() > 0
    ratio = (batch.logprobs - batch.old_logprobs)[on].exp()
    assert (ratio < 0.8).any() and (ratio > 1.28).any() and (ratio > 3.0).any()
    assert batch.sampler_logprobs[~on].abs().sum() == 0
    # turn-level credit: every turn has its span and anchor, and anchors repeat within a group
    assert [len(t) for t in batch.turns] == [len(s) for s in batch.turn_spans] and all(map(len, batch.turns))
    anchors = [(int(batch.group_ids[row]), turn.state) for row, turns in enumerate(batch.turns) for turn in turns]
    assert len(set(anchors)) < len(anchors) and all(state is not None for _, state in anchors)


def test_same_seed_same_batch_and_another_seed_other_logprobs(batch):
    again, other = record_batch(RECIPE, seed=0), record_batch(RECIPE, seed=1)
    assert torch.equal(again.logprobs, batch.logprobs) and again.terminations == batch.terminations
    assert not torch.equal(other.logprobs, batch.logprobs)


def test_input_and_output_files_round_trip_exactly(tmp_path, batch):
    recipe = apply_overrides(RECIPE, {"loss.clip_high": 0.3})
    read_recipe, read_batch = read_input(write_input(tmp_path / "in.json", recipe, batch))
    assert read_recipe == recipe and read_batch.terminations == batch.terminations
    for name in ("rewards", "group_ids", "hacked", "response_mask", "sampler_logprobs", "old_logprobs", "logprobs",
                 "entropies"):
        assert torch.equal(getattr(read_batch, name), getattr(batch, name)), name
    assert read_batch.turns == batch.turns and read_batch.turn_spans == batch.turn_spans
    result = as_framework(reference(recipe, batch), "verl", [ByDesign({"loss.clip_c": None}, "why")])
    back = read_result(write_result(tmp_path / "out.json", result))
    assert (back.loss == result.loss and torch.equal(back.gradient, result.gradient)
            and back.by_design == result.by_design and back.figures == result.figures)


def test_a_file_in_another_format_is_a_clear_error(tmp_path):
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"format": "agentrl-parity-input", "version": VERSION}))
    with pytest.raises(ParityFormatError, match=f"expected a 'agentrl-parity-output' version {VERSION} file"):
        read_result(path)


def test_the_core_reference_as_a_framework_is_exact_everywhere(batch):
    table = parity_table(RECIPE, batch, [as_framework(reference(RECIPE, batch), "verl")])
    assert len(table.rows) == len(QUANTITIES) + len(FIGURES) and not table.mismatches and not table.differences
    assert not table.unreported
    assert all(row.max_abs_diff == 0 for row in table.rows)


def test_a_changed_upper_clip_is_reported_as_a_mismatch(batch):
    wrong = as_framework(reference(apply_overrides(RECIPE, {"loss.clip_high": 0.3}), batch), "verl")
    table = parity_table(RECIPE, batch, [wrong])
    assert {row.quantity for row in table.mismatches} == {"loss", "gradient", "gradient norm", "figure clip_fraction"}
    assert next(row for row in table.rows if row.quantity == "loss").max_abs_diff > 1e-3


def test_a_declared_difference_is_checked_against_its_own_reference_and_sized(batch):
    without_dual_clip = reference(apply_overrides(RECIPE, {"loss.clip_c": None}), batch)
    undeclared = parity_table(RECIPE, batch, [as_framework(without_dual_clip, "trl")])
    assert {row.quantity for row in undeclared.mismatches} == {"loss", "gradient", "gradient norm"}
    declared = parity_table(RECIPE, batch, [as_framework(without_dual_clip, "trl",
                                                         [ByDesign({"loss.clip_c": None}, "no dual clip")])])
    assert not declared.mismatches
    (difference,) = declared.differences
    assert difference.sizes["advantages"] == 0 and difference.sizes["loss"] > 1e-3
    assert difference.sizes["loss"] == pytest.approx(abs(without_dual_clip.loss - reference(RECIPE, batch).loss))


def test_a_missing_environment_names_the_framework_and_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTRL_VENVS", str(tmp_path))
    monkeypatch.delenv("AGENTRL_PYTHON_VERL", raising=False)
    with pytest.raises(FrameworkEnvError, match=r"no verl environment.*build_verl_env\.sh.*AGENTRL_PYTHON_VERL"):
        find_env("verl")
    monkeypatch.setenv("AGENTRL_PYTHON_VERL", sys.executable)
    assert find_env("verl") == FrameworkEnv("verl", Path(sys.executable), "AGENTRL_PYTHON_VERL")
    with pytest.raises(UnknownNameError, match="Did you mean 'verl'"):
        find_env("verll")


def test_an_environment_without_the_adapter_is_a_clear_error(tmp_path, batch):
    path = write_input(tmp_path / "in.json", RECIPE, batch)
    with pytest.raises(FrameworkEnvError, match="has no agentrl-verl"):
        run_side(FrameworkEnv("verl", Path(sys.executable), "test"), path, tmp_path / "o.json")


def test_the_report_shows_the_table_versions_seeds_and_differences(tmp_path, batch):
    result = as_framework(reference(apply_overrides(RECIPE, {"loss.clip_c": None}), batch), "trl",
                          [ByDesign({"loss.clip_c": None}, "no dual clip")])
    env = FrameworkEnv("trl", Path(sys.executable), "test")
    run = ParityRun(RECIPE, {}, batch, [env], [result], parity_table(RECIPE, batch, [result]))
    text = write_report(run, tmp_path).read_text()
    assert "every exact component agrees within 1e-06" in text and "Batch seed 0" in text
    assert "| trl | loss |" in text and "no dual clip" in text and "core with loss.clip_c=None" in text


def test_compare_names_known_frameworks_and_parity_takes_one_recipe():
    runner = CliRunner()
    with pytest.raises(AgentRLError, match="--parity compares frameworks on one recipe"):
        runner.invoke(build_app(), ["compare", "deepswe_grpopp", "grpo", "--parity"], catch_exceptions=False)
    with pytest.raises(AgentRLError, match="--seeds takes comma-separated integers"):
        runner.invoke(build_app(), ["compare", "deepswe_grpopp", "grpo", "--framework", "trl", "--seeds", "0,one"],
                      catch_exceptions=False)
    with pytest.raises(UnknownNameError, match="Did you mean 'openrlhf'"):
        runner.invoke(build_app(), ["compare", "deepswe_grpopp", "--frameworks", "openrlfh", "--parity"],
                      catch_exceptions=False)


def test_a_framework_figure_off_its_definition_is_a_mismatch_and_a_missing_one_is_shown(batch):
    core = reference(RECIPE, batch)
    off = as_framework(core, "verl")
    off.figures.update(entropy=core.figures["entropy"] * 1.01, clip_fraction=None)
    table = parity_table(RECIPE, batch, [off])
    assert [row.quantity for row in table.mismatches] == ["figure entropy"]
    assert [row.quantity for row in table.unreported] == ["figure clip_fraction"]
    assert "| figure clip_fraction | not reported |" in markdown(table)


def test_the_reference_figures_follow_their_definitions_on_the_batch(batch):
    figures = reference(RECIPE, batch).figures
    advantages = RecipeAlgorithm.from_recipe(RECIPE).advantages(batch.rewards, batch.group_ids, batch.terminations)
    loss_tokens = (batch.response_mask > 0) & advantages.valid[:, None]
    ratio = (batch.logprobs - batch.old_logprobs).exp()
    a = advantages.values[:, None].expand_as(ratio)
    clipped = [(r < 1 - RECIPE.loss.clip_low and v < 0) or (r > 1 + RECIPE.loss.clip_high and v > 0)
               for r, v in zip(ratio[loss_tokens].tolist(), a[loss_tokens].tolist())]
    assert figures["policy_tokens"] == len(clipped) > 0
    assert figures["clip_fraction"] == pytest.approx(sum(clipped) / len(clipped), abs=1e-12) and 0 < sum(clipped)
    assert figures["entropy"] == pytest.approx(batch.entropies[loss_tokens].mean().item(), abs=1e-12)
    assert figures["filtered_fraction"] == pytest.approx(1 - advantages.valid.double().mean().item())


def test_a_side_whose_adapter_refuses_the_recipe_says_why_without_a_traceback(tmp_path, batch, monkeypatch,
                                                                             capsys):
    import agentrl_plugins.compare.side as side

    def refusing(recipe, batch):
        raise RecipeError(f"{recipe.name}: advantage.estimator = 'gigpo' gives one advantage per turn")

    monkeypatch.setattr(side, "parity_compute", lambda framework: refusing)
    path = write_input(tmp_path / "in.json", RECIPE, batch)
    with pytest.raises(SystemExit) as stopped:
        side.main(["verl", str(path), str(tmp_path / "out.json")])
    assert stopped.value.code == side.REFUSED_EXIT
    message = capsys.readouterr().err.strip()
    assert message == "deepswe_grpopp: advantage.estimator = 'gigpo' gives one advantage per turn"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho \"{message}\" >&2\n"
                    f"exit {side.REFUSED_EXIT}\n")
    fake.chmod(0o755)
    with pytest.raises(FrameworkEnvError, match=r"^verl refuses the recipe: deepswe_grpopp: advantage.estimator"):
        run_side(FrameworkEnv("verl", fake, "test"), path, tmp_path / "o.json")


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_rank_trains_on_every_group_and_every_row_is_trained_once(batch, ranks):
    split = dataclasses.replace(batch, ranks=ranks)
    rows = split.rank_rows()
    assert sorted(torch.cat(rows).tolist()) == list(range(len(batch.rewards)))
    assert all(set(batch.group_ids[r].tolist()) == set(batch.group_ids.tolist()) for r in rows), \
        "every group's members sit on different ranks, the case a per-rank group statistic gets wrong"
    assert ParityBatch.from_dict(split.to_dict()).ranks == ranks
