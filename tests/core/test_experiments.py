"""The book's experiments: each one's arms share a sample budget as shipped, its predictions get the verdict the
seed figures support, and the trust-region probe gives the objectives experiment its GSPO verdict."""

from __future__ import annotations

import pytest

from agentrl_plugins.compare.experiments import (
    Prediction,
    Verdict,
    experiment,
    experiment_section,
    probe_verdict,
    read_experiment,
    seed_means,
)
from agentrl_plugins.compare.learning import Arm, ArmResult, check_budgets, plan_arms
from agentrl_plugins.compare.trust_region import probe_rows
from agentrl_plugins.errors import RecipeError, UnknownNameError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.rundir import RunDir


def test_the_shipped_experiments_are_registered_from_their_files():
    assert get_plugin_manager().registry("experiment").names() == ["credit", "objectives"]
    chosen = experiment("credit")
    assert chosen.recipes == ("grpo", "gigpo", "potential_shaping") and len(chosen.predictions) == 2
    assert chosen.predictions[1] == Prediction("shaping on public tests may raise hardcode_tests", "hacked_fraction",
                                               "potential_shaping", "grpo")
    assert experiment("objectives").trust_region_probe and not chosen.trust_region_probe


@pytest.mark.parametrize("name", ["credit", "objectives"])
def test_each_experiments_arms_share_one_sample_budget_as_shipped(name):
    chosen = experiment(name)
    shared = check_budgets(plan_arms(list(chosen.recipes), ["trl"]), list(chosen.overrides))
    assert shared["train.steps"] * shared["optim.updates_per_step"] == 20 and shared["rollout.group_size"] == 8
    if name == "credit":
        assert shared["environment"] == ("bugfix", {"renamed_variants": 4, "turn_signals": True}), \
            "potential shaping reads the public pass fraction, so every arm measures it"


def test_an_unknown_experiment_names_the_close_ones():
    with pytest.raises(UnknownNameError, match="Did you mean 'credit'"):
        experiment("credt")


GOOD = """description = "Two losses."
recipes = ["grpo", "dr_grpo"]
[[predictions]]
claim = "longer failures"
figure = "failure_tokens"
higher = "grpo"
lower = "dr_grpo"
"""


@pytest.mark.parametrize(("text", "message"), [
    (GOOD.replace("recipes =", "recipe ="), "unknown key 'recipe'. Did you mean 'recipes'"),
    (GOOD.replace('description = "Two losses."', ""), "'description' is missing"),
    (GOOD.replace('["grpo", "dr_grpo"]', '"grpo"'), "'recipes' must be a list, got 'grpo'"),
    (GOOD.replace('["grpo", "dr_grpo"]', '["grpo", 3]'), "'recipes' must list strings"),
    (GOOD.replace('lower = "dr_grpo"', 'lower = "dapo"'), "compares 'dapo', which is not one of its recipes"),
    (GOOD.replace('lower = "dr_grpo"', ""), "predictions[0] must be a table of the strings claim, figure"),
    (GOOD.replace('"failure_tokens"', '"length"'), "predictions[0]: prediction 'longer failures': 'length' is no"),
    ("trust_region_probe = 1\n" + GOOD, "'trust_region_probe' must be bool"),
    ("recipes = [", "not valid TOML"),
])
def test_a_malformed_experiment_file_is_a_clear_error_naming_it(tmp_path, text, message):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(RecipeError) as raised:
        read_experiment("mine", path)
    assert message in str(raised.value) and str(path) in str(raised.value)


def test_a_prediction_names_a_figure_of_the_metrics_rows():
    with pytest.raises(ValueError, match="'length' is no metrics.jsonl figure"):
        Prediction("longer", "length", "a", "b")


def arm_result(tmp_path, recipe, per_seed):
    """An arm whose seed N ran two training steps with ``failure_tokens`` per_seed[N] (and a step 0 without)."""
    runs = {}
    for seed, values in enumerate(per_seed):
        run = RunDir(tmp_path / recipe / f"seed{seed}")
        run.path.mkdir(parents=True)
        for step, value in enumerate([None, *values]):
            run.append_metrics(StepMetrics(step, None, None, None, None, None, None, None, None, 0, 1.0,
                                           failure_tokens=value))
        runs[seed] = run
    return ArmResult(Arm(recipe, "trl"), runs, {})


@pytest.mark.parametrize(("higher", "lower", "outcome"), [
    ([[40, 44], [50, 50]], [[20, 20], [24, 28]], "held"),  # means 47 vs 23, spreads 8 and 6
    ([[20, 20], [24, 28]], [[40, 44], [50, 50]], "contradicted"),
    ([[40, 44], [20, 20]], [[30, 30], [34, 30]], "not resolved: the difference is within the seed spread"),
])
def test_a_prediction_holds_only_beyond_the_larger_seed_spread(tmp_path, higher, lower, outcome):
    first, second = arm_result(tmp_path, "deepseekmath_grpo", higher), arm_result(tmp_path, "dr_grpo", lower)
    assert seed_means(first, "failure_tokens") == [sum(v) / 2 for v in higher]
    verdict = Verdict(experiment("objectives").predictions[0], seed_means(first, "failure_tokens"),
                      seed_means(second, "failure_tokens"))
    assert verdict.outcome == outcome
    assert verdict.line().startswith("- **GRPO's 1/|o| normalisation lengthens failures relative to Dr. GRPO** "
                                     "(failure_tokens: deepseekmath_grpo ") and verdict.line().endswith(f": {outcome}.")


def test_an_arm_without_the_figure_leaves_the_prediction_unresolved(tmp_path):
    empty = arm_result(tmp_path, "grpo", [[None, None]])
    verdict = Verdict(experiment("objectives").predictions[0], seed_means(empty, "failure_tokens"), [1.0])
    assert verdict.outcome == "not resolved: an arm has no value of this figure"


def test_the_probe_finds_gspo_lets_a_few_large_changes_of_a_long_trajectory_through():
    rows = probe_rows(("grpo", "gspo", "cispo"))
    line = probe_verdict(rows)
    assert line.endswith(": held.") and "L = 10000, 5 tokens moved by +0.5" in line
    by = {(r.recipe, r.length, r.changed, r.delta): r for r in rows}
    assert by[("grpo", 10000, 5, 0.5)].clip_fraction == pytest.approx(5 / 10000), "the token clip catches each one"
    assert by[("gspo", 100, 5, 0.5)].clip_fraction == 1.0, "on a short trajectory the sequence ratio clips it all"
    assert by[("cispo", 10000, 5, 2.0)].gradient_changed > 0, "cispo never removes a token's gradient"


def test_the_objectives_section_has_a_verdict_per_prediction_and_the_probe(tmp_path):
    results = [arm_result(tmp_path, recipe, [[40.0, 44.0], [50.0, 50.0]]) for recipe in
               experiment("objectives").recipes]
    section = experiment_section(experiment("objectives"), results)
    assert section.startswith("## The book's predictions\n\n- **GRPO's 1/|o|")
    assert "difference +0.000" in section and "not resolved" in section
    assert "### The trust-region probe" in section and "| gspo | gspo | 0.0003 / 0.0004 | 10000 | 5 | +0.5 |" in section
