"""The entry-point module: registers each component and a recipe that uses all four, and brings in the event
hooks of ``events.py``."""

from pathlib import Path

from agentrl_plugins import hookimpl
from agentrl_plugins.components import AdvantageEstimator, Correction, Environment, RecipeFile, Verifier

from agentrl_example_plugin.advantage import median_baseline
from agentrl_example_plugin.agent import ArithmeticAgent
from agentrl_example_plugin.correction import band_clip
from agentrl_example_plugin.environment import ArithmeticEnv
from agentrl_example_plugin.events import agentrl_episode_end, agentrl_step_end  # noqa: F401 (registered with this module)
from agentrl_example_plugin.verifier import exact_answer


@hookimpl
def agentrl_register_environments(register):
    register(Environment("arithmetic", ArithmeticEnv, "Two-number arithmetic with a calculator tool."))
    register(Environment("arithmetic_agent", ArithmeticAgent,
                         "The arithmetic tasks played by an openai-client agent program through the gateway."))


@hookimpl
def agentrl_register_verifiers(register):
    register(Verifier("exact_answer", lambda: exact_answer, "Reward 1 for the exact result."))


@hookimpl
def agentrl_register_advantages(register):
    register(AdvantageEstimator("median_baseline", median_baseline, "Reward minus the group's median reward."))


@hookimpl
def agentrl_register_corrections(register):
    register(Correction("band_clip", band_clip, "Token ratio clamped into [low, high]."))


@hookimpl
def agentrl_register_recipes(register):
    register(RecipeFile("arithmetic_median", Path(__file__).with_name("arithmetic_median.toml"),
                        "GRPO's settings with the example's four components."))
