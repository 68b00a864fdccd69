"""Episodes as a recipe sets them up, once for every framework: environment, tasks, verifier, limits, sampling, hooks.

Each adapter builds one :class:`EpisodeService` from the recipe and supplies only its ``generate``
(TRL's model, verl's server manager, OpenRLHF's engine); where a framework caps a limit or owns the
sampling settings, it passes them in and the service applies them the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms.distillation import reverse_kl_signal
from agentrl_plugins.chat import ChatCodec
from agentrl_plugins.environment import (
    EnvironmentSuite,
    VerifierFn,
    build_environment,
    close_environment,
    is_agent_program,
)
from agentrl_plugins.episode import Generate, run_episode
from agentrl_plugins.errors import RecipeError, UnknownNameError
from agentrl_plugins.recipe_schema import EnvironmentSection, Recipe
from agentrl_plugins.turn_rewards import TurnRewardFn, build_turn_reward
from agentrl_plugins.types import Limits, Sampling, Task, Trajectory
from agentrl_plugins.verifiers import build_verifier

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager


@dataclass
class EpisodeService:
    """The recipe's episodes: one environment suite (its sandbox shared by every episode), its tasks by id,
    the verifier, the turn reward, the limits and sampling, compact filtering, and the plugins' event hooks."""

    recipe: Recipe
    env: EnvironmentSuite
    verifier: VerifierFn
    algorithm: RecipeAlgorithm
    hooks: Any = None
    tasks: dict[str, Task] = field(default_factory=dict)
    environment_name: str = ""
    turn_reward: TurnRewardFn | None = None
    closed: bool = False
    gateway: Any = None
    """The OpenAI-compatible gateway an agent-program environment's episodes call (started on first use)."""
    teacher: Any = None
    """The distillation teacher (:class:`~agentrl_plugins.teacher.BatchingTeacher`, loaded on first use)."""
    plugin_manager: Any = None

    @classmethod
    def from_recipe(cls, recipe: Recipe, plugin_manager: PluginManager | None = None,
                    environment: EnvironmentSection | None = None) -> EpisodeService:
        """Build the recipe's environment (or ``environment``, a section naming another), verifier and filter."""
        if plugin_manager is None:
            from agentrl_plugins.plugins import get_plugin_manager

            plugin_manager = get_plugin_manager()
        settings = environment or recipe.environment
        env = build_environment(settings, plugin_manager)
        try:
            if environment is None:
                check_enough_tasks(recipe, env)
            verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, plugin_manager)
            algorithm = RecipeAlgorithm.from_recipe(recipe, plugin_manager)
            turn_reward = build_turn_reward(recipe, plugin_manager)
        except Exception:
            close_environment(env)
            raise
        return cls(recipe, env, verifier, algorithm, plugin_manager.hook, {task.id: task for task in env.tasks()},
                   settings.name, turn_reward, plugin_manager=plugin_manager)

    def split(self, name: str) -> list[Task]:
        """The tasks of split ``name`` (``environment.train_split`` or ``eval_split``), in the environment's order."""
        return list(self.env.tasks(name))

    def task(self, task_id: str, hint: str = "") -> Task:
        """The task ``task_id``; an unknown id lists the close matches and ``hint`` (how to write the dataset)."""
        if task_id not in self.tasks:
            raise UnknownNameError(f"{self.environment_name} task", task_id, self.tasks, hint)
        return self.tasks[task_id]

    def limits(self, max_context_tokens: int | None = None) -> Limits:
        """The recipe's limits; a framework's own context cap (``max_context_tokens``) lowers the budget."""
        rollout = self.recipe.rollout
        context = rollout.max_context_tokens if max_context_tokens is None else min(rollout.max_context_tokens,
                                                                                     max_context_tokens)
        return Limits(rollout.max_turns, context, rollout.max_new_tokens_per_turn, rollout.timeout_s)

    def sampling(self, temperature: float | None = None, top_p: float | None = None,
                 top_k: int | None = None) -> Sampling:
        """The recipe's sampling, or the framework's own values where it owns them (its command line)."""
        rollout = self.recipe.rollout
        return Sampling(rollout.temperature if temperature is None else float(temperature),
                        rollout.top_p if top_p is None else float(top_p),
                        rollout.top_k if top_k is None else int(top_k), rollout.max_new_tokens_per_turn)

    def codec(self, tokenizer: Any) -> ChatCodec:
        """One chat codec per tokenizer, shared by a batch of episodes (it caches the system prompt's ids)."""
        return ChatCodec(tokenizer, getattr(self.env, "system_prompt", None))

    async def play(self, task: Task, generate: Generate, tokenizer: Any, *, sampling: Sampling | None = None,
                   limits: Limits | None = None, group_id: int = 0, policy_version: int = 0,
                   codec: ChatCodec | None = None) -> Trajectory:
        """One episode of ``task`` through the core runner (or, for an agent-program environment, its program
        through the gateway), scored by the verifier (and by the distillation teacher, where the recipe names
        one), announced to the hooks."""
        hooks = None if self.algorithm.distills else self.hooks  # announced once the teacher has scored it
        if is_agent_program(self.env):
            from agentrl_plugins.gateway import Gateway, play_agent_program

            if self.gateway is None:
                self.gateway = Gateway().start()
            trajectory = await play_agent_program(
                self.gateway, self.env, task, generate, tokenizer, limits or self.limits(),  # type: ignore[arg-type]
                sampling or self.sampling(), verifier=self.verifier, group_id=group_id,
                policy_version=policy_version, hooks=hooks)
        else:
            trajectory = await run_episode(self.env, task, generate, tokenizer, limits or self.limits(),
                                           verifier=self.verifier, sampling=sampling or self.sampling(),
                                           group_id=group_id, policy_version=policy_version, codec=codec,
                                           hooks=hooks, turn_reward=self.turn_reward)
        if self.algorithm.distills:
            await self.distill(trajectory, tokenizer)
            if self.hooks is not None:
                self.hooks.agentrl_episode_end(trajectory=trajectory)
        return trajectory

    async def distill(self, trajectory: Trajectory, tokenizer: Any) -> None:
        """The teacher's log-probs and the distillation signal on ``trajectory`` and each of its segments (each
        scored on the tokens its sampler saw)."""
        if self.teacher is None:
            self.teacher = load_teacher(self.recipe, tokenizer, self.plugin_manager)
        settings = self.recipe.distillation
        for part in (trajectory, *trajectory.segments):
            scored = await self.teacher.score(part)
            part.teacher_logprobs, part.teacher_seconds = scored.logprobs, scored.seconds
            part.token_advantages = reverse_kl_signal(part.logprobs, part.teacher_logprobs, part.response_mask,
                                                      settings.coef)

    def keeps(self, trajectory: Trajectory) -> bool:
        """Whether ``trajectory`` keeps its loss tokens after the recipe's compact filtering."""
        return bool(self.algorithm.valid([trajectory.termination])[0])

    def close(self) -> None:
        """Release the environment's resources; a second call does nothing."""
        if not self.closed:
            self.closed = True
            if self.gateway is not None:
                self.gateway.stop()
            close_environment(self.env)


def load_teacher(recipe: Recipe, tokenizer: Any, plugin_manager: PluginManager | None = None) -> Any:
    """The recipe's distillation teacher in this process, batched across episodes, checked against the student's
    ``tokenizer``."""
    from agentrl_plugins.models import resolve_model
    from agentrl_plugins.teacher import BatchingTeacher, Teacher

    folder = resolve_model(recipe.distillation.teacher, seed=recipe.train.seed, prepare=True,
                           plugin_manager=plugin_manager)
    teacher = Teacher(folder)
    teacher.check_vocabulary(tokenizer)
    return BatchingTeacher(teacher)


def check_enough_tasks(recipe: Recipe, env: EnvironmentSuite) -> None:
    """A step draws ``rollout.tasks_per_step`` distinct train tasks: a smaller train split is an error, not a run
    that stops at step 0."""
    split = recipe.environment.train_split
    count = len(list(env.tasks(split)))
    wanted = recipe.rollout.tasks_per_step
    if count < wanted:
        raise RecipeError(f"recipe {recipe.name!r}: rollout.tasks_per_step = {wanted}, but environment "
                          f"{recipe.environment.name!r} has {count} tasks in split {split!r}. Lower it "
                          f"(-o rollout.tasks_per_step={max(count, 1)}) or give the environment more tasks.")


def grouped(tasks: Sequence[Task], group_size: int) -> list[tuple[int, Task]]:
    """``(group id, task)`` for ``group_size`` consecutive episodes of each task, in task order."""
    return [(index // group_size, task) for index, task in enumerate(t for t in tasks for _ in range(group_size))]
