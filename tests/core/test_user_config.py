"""One rule for a user's own framework configuration against the recipe, and the loggers ``--report-to`` names."""

from __future__ import annotations

import enum
import pickle

import pytest

from agentrl_plugins.errors import AgentRLError, UnknownNameError
from agentrl_plugins.loggers import check_loggers, parse_loggers
from agentrl_plugins.user_config import (
    ConfigConflictError,
    Decided,
    SettingConflict,
    changes_table,
    origins,
    own_words,
    reconcile,
    same,
    settings_table,
)

DECIDED = [Decided("lr", 1e-6, "optim.lr=1e-06"), Decided("loss", "luspo", "loss.aggregation='seq-mean-token-sum'"),
           Decided("steps", 1, "adapter: one row per step")]
DEFAULTS = {"lr": 5e-5, "loss": "dapo", "steps": 10}


def test_defaults_take_the_recipe_and_each_change_is_listed():
    changes = reconcile(DECIDED, {"lr": 5e-5, "loss": "luspo"}, DEFAULTS, where="Config", recipe="r", remedy="")
    assert [(c.name, c.default, c.value) for c in changes] == [("lr", 5e-5, 1e-6), ("steps", 10, 1)]
    table = changes_table(changes, "Config", "r")
    assert "set 2 settings" in table and "optim.lr=1e-06" in table and "adapter: one row per step" in table


def test_every_setting_the_user_chose_otherwise_is_named_with_both_values():
    with pytest.raises(ConfigConflictError) as error:
        reconcile(DECIDED, {"lr": 1e-3, "loss": "grpo", "steps": 10}, DEFAULTS, where="Config", recipe="r",
                  remedy="Change the recipe.")
    assert [(c.name, c.yours, c.value) for c in error.value.conflicts] == [("lr", 1e-3, 1e-6),
                                                                           ("loss", "grpo", "luspo")]
    message = str(error.value)
    assert "your Config contradicts recipe 'r' on 2 settings" in message and "'grpo'" in message
    assert message.endswith("Change the recipe.")


def test_a_typed_value_equal_to_the_frameworks_default_is_the_users_not_a_default():
    with pytest.raises(ConfigConflictError) as error:
        reconcile(DECIDED, {"lr": 5e-5, "steps": 10}, DEFAULTS, where="Config", recipe="r", remedy="",
                  typed={"lr"})
    assert [(c.name, c.yours, c.value) for c in error.value.conflicts] == [("lr", 5e-5, 1e-6)]
    changes = reconcile(DECIDED, {"lr": 1e-6, "steps": 10}, DEFAULTS, where="Config", recipe="r", remedy="",
                        typed={"lr"})
    assert [c.name for c in changes] == ["loss", "steps"], "typed and equal to the recipe: nothing to change"


def test_the_conflict_pickles_with_its_type_and_fields():
    error = ConfigConflictError("verl config", "r", [SettingConflict("lr", 5e-5, 1e-6, "optim.lr=1e-06")], "Fix it.")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is ConfigConflictError and str(again) == str(error)
    assert (again.where, again.recipe, again.conflicts, again.remedy) == ("verl config", "r", error.conflicts,
                                                                          "Fix it.")


def test_the_origin_table_names_the_recipe_the_user_and_the_project():
    defaults = {**DEFAULTS, "out": "/tmp", "device": "cuda"}
    rows = origins(DECIDED, defaults, {"lr": 1e-6, "out": "/runs", "device": "cpu"}, {"device": "project (CPU)"})
    assert [(r.name, r.origin) for r in rows] == [("lr", "recipe"), ("loss", "recipe"), ("steps", "recipe"),
                                                  ("out", "user"), ("device", "project (CPU)")]
    table = settings_table(rows, "Config", "r")
    assert "3 recipe, 1 user, 1 project (CPU)" in table
    assert table.splitlines()[-2].split() == ["out", "'/runs'", "user", "'/tmp'", "your", "command"]
    (agreed,) = [r for r in origins(DECIDED, defaults, {"steps": DECIDED[2].value}, {}) if r.name == "steps"]
    assert agreed.origin == "recipe" and agreed.source.endswith("; your command sets the same"), \
        "a value you typed that the recipe also sets is known to be yours"


def test_the_users_own_words_are_told_from_the_prepared_commands_even_when_they_repeat_one():
    prepared = ["a=1", "b=2", "--c", "1"]
    assert own_words([*prepared, "b=2", "d=4"], prepared) == ["b=2", "d=4"], "after the prepared script's words"
    assert own_words(["b=2", "a=1", "--c", "1", "b=2"], prepared) == ["b=2"], "a printed command edited in place"
    assert own_words(["a=1", "--c", "1"], prepared) == [] and own_words(["x=0"], []) == ["x=0"]


def test_values_compare_as_configuration_values():
    class Kind(enum.Enum):
        CONSTANT = "constant"

    assert same(Kind.CONSTANT, "constant") and same(1, 1.0) and same((0.9, 0.99), [0.9, 0.99])
    assert not same(True, 1) and not same(0.2, 0.28) and not same({"a": 1}, {"a": 2})


def test_logger_names_are_checked_with_close_matches():
    assert parse_loggers("tensorboard, wandb") == ("tensorboard", "wandb") and parse_loggers("none") == ()
    with pytest.raises(UnknownNameError, match=r"'tensorbord'.*Did you mean 'tensorboard'"):
        parse_loggers("tensorbord")


def test_a_logger_not_installed_says_how_to_install_it(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(AgentRLError, match=r"trackio.*pip install trackio"):
        check_loggers(["trackio"])
    check_loggers([])



def test_wandb_without_credentials_is_refused_before_it_would_stop_the_run_to_ask(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "wandb" else real(name, *a))
    for name in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    with pytest.raises(AgentRLError, match=r"W&B has no API key here\. Set WANDB_API_KEY .* WANDB_MODE=offline"):
        check_loggers(["wandb"])
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password k\n")
    check_loggers(["wandb"])
    monkeypatch.setenv("NETRC", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_loggers(["wandb"])
