"""TRL's ``rollout_func``: every prompt is a task id; each episode runs through the core episode runner.

The episodes of a step run concurrently and share one batched generator, so a
step costs about as many forward passes as its longest episode has tokens.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Callable, Sequence

from agentrl_plugins.episode import Generate
from agentrl_plugins.episode_service import EpisodeService, grouped
from agentrl_plugins.types import Task, Trajectory

GeneratorFactory = Callable[[Any, int], Generate]


def step_seed(seed: int, step: int, purpose: str) -> int:
    """A seed that depends only on the run's seed, the step and what it is for (rollout or eval)."""
    digest = hashlib.blake2b(f"{seed}:{step}:{purpose}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class EpisodeRollout:
    """Plays one episode per prompt; keeps the step's trajectories for the trainer's advantage step.

    ``service`` sets the episodes up from the recipe (environment, tasks, verifier, limits, sampling,
    hooks); this class only adds TRL's side: one batched generator per step from ``make_generator``.
    """

    def __init__(self, service: EpisodeService, tokenizer: Any, make_generator: GeneratorFactory, seed: int):
        self.service, self.tokenizer, self.make_generator, self.seed = service, tokenizer, make_generator, seed
        self.env, self.tasks = service.env, service.tasks
        self.codec = service.codec(tokenizer)
        self.trajectories: list[Trajectory] = []
        self.last_generator: Generate | None = None

    def play(self, model: Any, tasks: Sequence[Task], group_size: int, step: int, purpose: str) -> list[Trajectory]:
        """Run ``group_size`` concurrent episodes per task.

        Training episodes sample with a seed for (step, purpose). Every evaluation samples with the run's
        seed itself, as verl's and OpenRLHF's rollout servers do before their first update: step 0 then
        draws the same numbers in all three, and each checkpoint is evaluated on the same draws.
        """
        seed = self.seed if purpose == "eval" else step_seed(self.seed, step, purpose)
        generate = self.make_generator(model, seed)
        self.last_generator = generate

        async def episodes() -> list[Trajectory]:
            return list(await asyncio.gather(*[
                self.service.play(task, generate, self.tokenizer, group_id=group, policy_version=step,
                                  codec=self.codec)
                for group, task in grouped(tasks, group_size)
            ]))

        was_training = model.training
        model.eval()
        try:
            return asyncio.run(episodes())
        finally:
            model.train(was_training)

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        group_size = trainer.num_generations
        tasks = [self.tasks[prompt] for prompt in prompts[::group_size]]
        if [self.tasks[p] for p in prompts] != [t for t in tasks for _ in range(group_size)]:
            raise ValueError("rollout_func expects each prompt repeated num_generations times in a row")
        model = trainer.accelerator.unwrap_model(trainer.model)
        step = trainer.state.global_step // trainer.args.num_iterations  # TRL's global_step counts updates
        self.trajectories = self.play(model, tasks, group_size, step, "rollout")
        pad = self.tokenizer.eos_token_id
        completions = [t.response_ids or [pad] for t in self.trajectories]
        return {
            "prompt_ids": [t.prompt_ids for t in self.trajectories],
            "completion_ids": completions,
            "logprobs": [t.logprobs or [0.0] for t in self.trajectories],
            "env_mask": [t.response_mask or [0] for t in self.trajectories],
            "episode_reward": [t.reward for t in self.trajectories],
        }


def episode_reward(prompts: list, completions: list, episode_reward: list[float], **kwargs: Any) -> list[float]:
    """TRL reward function: the verifier already scored each episode inside the rollout."""
    return list(episode_reward)
