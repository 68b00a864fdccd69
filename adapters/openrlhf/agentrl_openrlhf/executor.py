"""OpenRLHF's agent executor for agentrl recipes: each call plays one episode through the core episode runner.

The dataset's ``label`` is the task id (``agentrl openrlhf dataset`` writes it); the prompt
text is only echoed back, since the runner renders the task's prompt with the tokenizer's chat
template itself. The verifier's reward is the episode's reward. Policy tokens are exactly the
``action_ranges``; a compact-filtered episode returns ``action_ranges=[]`` and so carries no loss.
"""

from __future__ import annotations

from typing import Any

from openrlhf.utils.agent import AgentExecutorBase

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.environment import build_environment
from agentrl_plugins.episode import run_episode
from agentrl_plugins.errors import UnknownNameError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.runs.evaluate import honest_pass
from agentrl_plugins.types import Limits, Sampling, Trajectory
from agentrl_plugins.verifiers import build_verifier

from agentrl_openrlhf.engine import engine_generate
from agentrl_openrlhf.recipe_env import recipe_from_env
from agentrl_openrlhf.terminations import termination_logs


def executor_output(trajectory: Trajectory, prompt: Any, label: Any, images: Any, keep: bool) -> dict[str, Any]:
    """OpenRLHF's executor dict for one episode; ``keep=False`` removes it from the loss."""
    offset = len(trajectory.prompt_ids)
    spans = [(offset + start, offset + end) for start, end in trajectory.turn_spans if end > start]
    return {
        "prompt": prompt,
        "label": label,
        "images": images,
        "mm_train_inputs": None,
        "reward": trajectory.reward,
        "scores": trajectory.reward,
        "observation_tokens": trajectory.token_ids,
        "action_ranges": spans if keep else [],
        "rollout_log_probs": [0.0] * offset + trajectory.logprobs,
        "truncated": trajectory.termination == "max_context",
        "extra_logs": {
            "passed": float(honest_pass(trajectory.verdict)),
            "hacked": float(bool(trajectory.verdict and trajectory.verdict.hacked)),
            "filtered": float(not keep),
            "num_turns": float(trajectory.num_turns),
            **termination_logs(trajectory.termination),
        },
    }


class AgentExecutor(AgentExecutorBase):
    """Plays the task named by ``label`` with the recipe in ``AGENTRL_OPENRLHF_RECIPE``.

    Sampling (temperature, top-p, top-k) is OpenRLHF's, so rollouts and evaluation sample as
    its command line says; turns, per-turn tokens and the timeout are the recipe's, and the
    context budget is the smaller of the recipe's and OpenRLHF's ``max_length``.
    """

    def __init__(self):
        recipe = recipe_from_env()
        manager = get_plugin_manager()
        self.recipe = recipe
        self.env = build_environment(recipe.environment, manager)
        self.tasks = {task.id: task for task in self.env.tasks()}
        self.verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, manager)
        self.algorithm = RecipeAlgorithm.from_recipe(recipe, manager)
        self.hooks = manager.hook

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        if label not in self.tasks:
            raise UnknownNameError(f"{self.recipe.environment.name} task", label, self.tasks,
                                   "Write the prompt dataset with `agentrl openrlhf dataset`.")
        rollout = self.recipe.rollout
        limits = Limits(rollout.max_turns, min(rollout.max_context_tokens, max_length),
                        rollout.max_new_tokens_per_turn, rollout.timeout_s)
        sampling = Sampling(sampling_params.temperature, sampling_params.top_p, sampling_params.top_k,
                            rollout.max_new_tokens_per_turn)
        trajectory = await run_episode(self.env, self.tasks[label], engine_generate(llm_engine, sampling_params),
                                       hf_tokenizer, limits, verifier=self.verifier, sampling=sampling,
                                       hooks=self.hooks)
        keep = bool(self.algorithm.valid([trajectory.termination])[0])
        return executor_output(trajectory, prompt, label, images, keep)
