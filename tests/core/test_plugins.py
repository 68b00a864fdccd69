"""The plugin manager: provenance, duplicates, unknown names, broken plugins, allow/block lists."""

from __future__ import annotations

import pytest

from agentrl_plugins import hookimpl
from agentrl_plugins.components import AdvantageEstimator, Environment, Verifier
from agentrl_plugins.environment import build_environment
from agentrl_plugins.errors import DuplicateNameError, UnknownNameError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe, parse_overrides
from agentrl_plugins.recipe_schema import EnvironmentSection

EXTRA_ESTIMATOR = """
from agentrl_plugins import hookimpl
from agentrl_plugins.components import AdvantageEstimator

@hookimpl
def agentrl_register_advantages(register):
    register(AdvantageEstimator("zero", lambda rewards, group_ids, valid=None, **kw: rewards * 0, "Always zero."))
"""


def test_builtins_are_registered_through_the_hooks_with_their_distribution():
    manager = PluginManager(load_entry_points=False)
    assert manager.registry("advantage").names() == ["dr_grpo", "gigpo", "grpo", "grpo_turns", "rloo"]
    assert manager.registry("policy_loss").names() == ["cispo", "gspo", "ppo_clip"]
    assert manager.registry("turn_reward").names() == ["none", "potential"]
    assert {"none", "token_tis", "sequence_tis", "icepop", "geometric_sequence_mask"} <= set(
        manager.registry("correction").names())
    entry = manager.registry("recipe").entry("deepswe_grpopp")
    assert entry.distribution == "agentrl-plugins"
    assert entry.plugin == "agentrl_plugins.default_plugins.recipes"


def test_unknown_name_lists_close_matches():
    manager = PluginManager(load_entry_points=False)
    with pytest.raises(UnknownNameError, match=r"unknown advantage 'rlo'\. Did you mean 'rloo'"):
        manager.get("advantage", "rlo")
    with pytest.raises(UnknownNameError, match="Did you mean 'correction'"):
        manager.registry("corection")


def test_registering_a_name_twice_names_both_plugins_and_distributions(fake_distribution):
    fake_distribution("fake-shadow", {"shadow": """
        from agentrl_plugins import hookimpl
        from agentrl_plugins.components import AdvantageEstimator

        @hookimpl
        def agentrl_register_advantages(register):
            register(AdvantageEstimator("rloo", lambda *a, **k: None, "A second rloo."))
    """})
    manager = PluginManager()
    with pytest.raises(DuplicateNameError) as error:
        manager.registry("advantage")
    message = str(error.value)
    assert "advantage 'rloo' is registered twice" in message
    assert "agentrl_plugins.default_plugins.advantages" in message and "agentrl-plugins" in message
    assert "'shadow'" in message and "fake-shadow" in message


def test_a_plugin_that_fails_to_import_is_reported_and_the_rest_works(fake_distribution):
    fake_distribution("fake-broken", {"broken": "import module_that_does_not_exist\n", "good": EXTRA_ESTIMATOR})
    manager = PluginManager()
    infos = {info.name: info for info in manager.plugin_table()}
    assert infos["broken"].status == "broken"
    assert infos["broken"].distribution == "fake-broken"
    assert "broken = fake_broken_broken" in infos["broken"].entry_point
    assert "ModuleNotFoundError" in infos["broken"].error and "module_that_does_not_exist" in infos["broken"].error
    assert infos["good"].status == "ok"
    assert manager.registry("advantage").entry("zero").distribution == "fake-broken"


def test_hook_implementations_are_validated_at_load(fake_distribution):
    fake_distribution("fake-invalid", {
        "typo": """
            from agentrl_plugins import hookimpl

            @hookimpl
            def agentrl_register_environment(register):
                pass
        """,
        "badargs": """
            from agentrl_plugins import hookimpl

            @hookimpl
            def agentrl_register_verifiers(register, extra):
                pass
        """,
        "wrongrecord": """
            from agentrl_plugins import hookimpl
            from agentrl_plugins.components import Verifier

            @hookimpl
            def agentrl_register_advantages(register):
                register(Verifier("v", lambda: None, "A verifier in the wrong hook."))
        """,
    })
    manager = PluginManager()
    infos = {info.name: info for info in manager.plugin_table()}
    assert infos["typo"].status == "broken"
    assert "unknown hook 'agentrl_register_environment'" in infos["typo"].error
    assert "Did you mean 'agentrl_register_environments'" in infos["typo"].error
    assert infos["badargs"].status == "broken" and "extra" in infos["badargs"].error
    assert infos["wrongrecord"].status == "broken"
    assert "expects AdvantageEstimator records, got Verifier" in infos["wrongrecord"].error
    assert "v" not in manager.registry("verifier")


def test_a_plugin_whose_second_registration_hook_raises_registers_nothing(fake_distribution):
    fake_distribution("fake-half", {"half": """
        from agentrl_plugins import hookimpl
        from agentrl_plugins.components import AdvantageEstimator

        @hookimpl
        def agentrl_register_advantages(register):
            register(AdvantageEstimator("half_first", lambda *a, **k: None, "Registered before the failure."))

        @hookimpl
        def agentrl_register_verifiers(register):
            raise RuntimeError("verifier table missing")
    """, "good": EXTRA_ESTIMATOR})
    manager = PluginManager()
    assert "half_first" not in manager.registry("advantage") and "zero" in manager.registry("advantage")
    info = {info.name: info for info in manager.plugin_table()}["half"]
    assert info.status == "broken"
    assert "agentrl_register_verifiers failed, so none of its components is registered" in info.error
    assert "verifier table missing" in info.error


def test_allowlist_and_blocklist_environment_variables(fake_distribution, monkeypatch):
    fake_distribution("fake-pair", {"first": EXTRA_ESTIMATOR, "second": EXTRA_ESTIMATOR.replace('"zero"', '"nil"')})
    monkeypatch.setenv("AGENTRL_PLUGINS", "first")
    allowed = PluginManager()
    assert "zero" in allowed.registry("advantage") and "nil" not in allowed.registry("advantage")
    assert {i.name: i.status for i in allowed.plugin_table()}["second"] == "disabled"
    monkeypatch.delenv("AGENTRL_PLUGINS")
    monkeypatch.setenv("AGENTRL_DISABLE_PLUGINS", "first")
    blocked = PluginManager()
    assert "zero" not in blocked.registry("advantage") and "nil" in blocked.registry("advantage")
    assert "rloo" in blocked.registry("advantage")


def test_records_validate_names_and_descriptions():
    with pytest.raises(ValueError, match="identifier"):
        Environment("not a name", object, "desc")
    with pytest.raises(ValueError, match="one-line description"):
        Verifier("v", lambda: None, "")
    with pytest.raises(ValueError, match="compute is missing"):
        AdvantageEstimator("a", None, "desc")


def test_step_end_hook_reaches_monitors():
    seen = []

    class Monitor:
        @hookimpl
        def agentrl_step_end(self, step, metrics):
            seen.append((step, metrics["reward"]))

    manager = PluginManager(load_entry_points=False)
    manager.add_plugin(Monitor(), "monitor", "tests")
    manager.hook.agentrl_step_end(step=3, metrics={"reward": 0.5})
    assert seen == [(3, 0.5)]


def test_adapter_correction_and_command_hooks_reach_the_cli(monkeypatch):
    from typer.testing import CliRunner

    from agentrl_plugins.adapter import ComponentMapping, FrameworkConfig
    from agentrl_plugins.cli import build_app
    from agentrl_plugins.components import Adapter, Correction

    class ToyAdapter:
        def describe(self, recipe):
            return FrameworkConfig("toy", {"clip": recipe.loss.clip_high},
                                   [ComponentMapping("loss.clip_high", recipe.loss.clip_high, "toy.clip", "native")],
                                   ["toy-train", f"--clip={recipe.loss.clip_high}"])

        def run(self, recipe, options):
            return None

    class ToyPlugin:
        @hookimpl
        def agentrl_register_adapters(self, register):
            register(Adapter("toy", ToyAdapter, "A toy framework."))

        @hookimpl
        def agentrl_register_corrections(self, register):
            register(Correction("halve", lambda learner, sampler, mask, **kw: mask * 0.5, "Halve every weight."))

        @hookimpl
        def agentrl_register_commands(self, cli):
            cli.command("hello")(lambda: print("hello from a plugin"))

    manager = PluginManager(load_entry_points=False)
    manager.add_plugin(ToyPlugin(), "toy-plugin", "toy-dist")
    assert manager.registry("correction").entry("halve").distribution == "toy-dist"
    monkeypatch.setattr("agentrl_plugins.cli.get_plugin_manager", lambda: manager)
    app = build_app(manager)
    shown = CliRunner().invoke(app, ["recipes", "show", "dapo", "--framework", "toy"], catch_exceptions=False)
    assert "toy.clip" in shown.output and "native" in shown.output and "--clip=0.28" in shown.output
    assert CliRunner().invoke(app, ["hello"]).output.strip() == "hello from a plugin"


def test_environment_options_reach_the_factory_and_unknown_ones_are_named():
    made = []

    def toy_suite(size: int = 1, seed: int = 0):
        made.append((size, seed))
        return made

    class ToyEnvironment:
        @hookimpl
        def agentrl_register_environments(self, register):
            register(Environment("toy", toy_suite, "A toy suite."))

    manager = PluginManager(load_entry_points=False)
    manager.add_plugin(ToyEnvironment(), "toy-env", "toy-dist")
    assert build_environment(EnvironmentSection("toy", options={"size": 3}), manager) == [(3, 0)]
    with pytest.raises(UnknownNameError, match="unknown option of environment 'toy' 'sise'.*Did you mean 'size'"):
        build_environment(EnvironmentSection("toy", options={"sise": 3}), manager)
    recipe = load_recipe("grpo", parse_overrides(["environment.options={renamed_variants=2}"]), plugin_manager=manager)
    assert recipe.environment.options == {"renamed_variants": 2}


ISOLATION = {
    "exits": "raise SystemExit(3)\n",
    "halfway": """
        from agentrl_plugins import hookimpl

        @hookimpl
        def agentrl_register_verifiers(register):
            raise RuntimeError("no verifier table")

        @hookimpl
        def agentrl_step_end(step, metrics):
            raise AssertionError("a broken plugin's other hooks must not run")
    """,
    "asynchronous": """
        from agentrl_plugins import hookimpl

        @hookimpl
        async def agentrl_step_end(step, metrics):
            pass
    """,
    "monitor": """
        from agentrl_plugins import hookimpl

        CALLS = []

        @hookimpl
        def agentrl_step_end(step, metrics):
            CALLS.append(step)
            raise ValueError("dashboard down")
    """,
    "commands": """
        from agentrl_plugins import hookimpl

        @hookimpl
        def agentrl_register_commands(cli):
            raise RuntimeError("no commands today")
    """,
    "good": EXTRA_ESTIMATOR,
}


def test_a_plugin_failing_anyhow_is_isolated_reported_and_the_rest_works(fake_distribution, capsys):
    fake_distribution("fake-hostile", ISOLATION)
    manager = PluginManager()
    infos = {info.name: info for info in manager.plugin_table()}
    assert infos["exits"].status == "broken" and "SystemExit: 3" in infos["exits"].error
    assert infos["halfway"].status == "broken" and not manager.has_plugin("halfway")
    assert infos["asynchronous"].status == "broken" and "is async" in infos["asynchronous"].error
    assert "zero" in manager.registry("advantage")
    for step in (1, 2):
        manager.hook.agentrl_step_end(step=step, metrics={})  # the monitor raises once, then is disabled
    monitor = __import__("fake_hostile_monitor")
    assert monitor.CALLS == [1]
    assert {info.name: info for info in manager.plugin_table()}["monitor"].status == "broken"
    assert capsys.readouterr().err.count("agentrl_step_end raised ValueError('dashboard down')") == 1
    from agentrl_plugins.cli import build_app

    app = build_app(manager)  # a failing command hook leaves the CLI working
    assert {command.name for command in app.registered_commands} >= {"plugins", "run"}
    assert {info.name: info for info in manager.plugin_table()}["commands"].status == "broken"


def test_an_entry_point_named_like_another_distributions_keeps_both(fake_distribution, capsys):
    fake_distribution("fake-first", {"same": EXTRA_ESTIMATOR})
    fake_distribution("fake-second", {"same": EXTRA_ESTIMATOR.replace('"zero"', '"nought"')})
    manager = PluginManager()
    assert {"zero", "nought"} <= set(manager.registry("advantage").names())
    names = {info.name: info.distribution for info in manager.plugin_table() if info.name.startswith("same")}
    assert len(names) == 2 and set(names.values()) == {"fake-first", "fake-second"}
    assert "has the name of" in capsys.readouterr().err
