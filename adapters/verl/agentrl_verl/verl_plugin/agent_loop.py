"""An agent loop per agentrl environment (``agentrl_<environment>``): the core episode runner inside verl.

Each row's ``extra_info.task_id`` names the task. The episode runs through the
core ``run_episode`` with a ``generate`` over ``server_manager.generate`` (token
ids in, token ids and log-probs out), so verl trains on exactly the tokens the
server sampled; observation tokens carry mask 0. The recipe's verifier sets
``reward_score`` (verl's reward loop is then skipped), and a compact-filtered
episode returns an all-zero ``response_mask``. Environment, limits, verifier and
filtering come from the run folder's ``recipe.toml`` (``+agentrl.recipe``), set up once per
process by the core's :class:`~agentrl_plugins.episode_service.EpisodeService`; sampling settings
from verl's own rollout config.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any, ClassVar
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from agentrl_plugins.algorithms.credit import TurnRecord
from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import EnvironmentSection
from agentrl_plugins.runs.evaluate import honest_pass
from agentrl_plugins.runs.figures import EpisodeCounts
from agentrl_plugins.runs.rundir import read_recipe_file
from agentrl_plugins.segments import training_segments
from agentrl_plugins.types import Generation, Sampling, Task, Trajectory

from agentrl_verl.episodes import EPISODES_FILE, EpisodeRecord, append_episode
from agentrl_verl.names import agent_loop_name
from agentrl_verl.recipe_file import recipe_path
from agentrl_verl.verl_plugin.estimators import TURNS_FIELD

TURN_ROLES = ("user", "assistant", "tool")


@functools.cache
def _service(path: str, stamp: int, environment: str, options: str) -> EpisodeService:
    return EpisodeService.from_recipe(read_recipe_file(Path(path)),
                                      environment=EnvironmentSection(environment, options=json.loads(options)))


def episode_service(recipe_file: Path, settings: EnvironmentSection) -> EpisodeService:
    """One service per process, recipe file and environment (its sandbox is shared by every episode)."""
    return _service(str(recipe_file), recipe_file.stat().st_mtime_ns, settings.name,
                    json.dumps(settings.options, sort_keys=True))


class ServerGenerate:
    """The core's ``generate`` over verl's ``server_manager.generate``; ``seconds`` adds up the waiting.

    ``global_steps`` collects the weight versions the server reported per turn (verl's trainer reads their
    min and max from every output).
    """

    def __init__(self, server_manager: Any, sampling_params: dict[str, Any], eos_token_id: int | None):
        self.server_manager, self.sampling_params, self.eos_token_id = server_manager, sampling_params, eos_token_id
        self.request_id = uuid4().hex
        self.seconds = 0.0
        self.global_steps: list[int] = []

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        params = {**self.sampling_params, "temperature": sampling.temperature, "top_p": sampling.top_p,
                  "top_k": sampling.top_k, "max_tokens": sampling.max_new_tokens, "logprobs": True}
        started = time.monotonic()
        output = await self.server_manager.generate(request_id=self.request_id, prompt_ids=list(token_ids),
                                                    sampling_params=params)
        self.seconds += time.monotonic() - started
        self.global_steps += [output.extra_fields[key] for key in ("min_global_steps", "max_global_steps")
                              if output.extra_fields.get(key) is not None]
        ids = list(output.token_ids)
        if output.log_probs is None or len(output.log_probs) != len(ids):
            raise ValueError(f"the rollout server returned {len(ids)} tokens but log-probs {output.log_probs!r}")
        stopped = bool(ids) and ids[-1] == self.eos_token_id or len(ids) < sampling.max_new_tokens
        return Generation(ids, [float(x) for x in output.log_probs], "stop" if stopped else "length")


class EpisodeAgentLoop(AgentLoopBase):
    """Runs one episode of the row's task in ``environment``; subclassed once per environment."""

    environment: ClassVar[str]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        path = recipe_path(self.config)
        self.recipe = read_recipe_file(path)
        self.episodes_file = path.parent / EPISODES_FILE
        named = self.recipe.environment
        self.service = episode_service(path, named if named.name == self.environment
                                       else EnvironmentSection(self.environment))
        self.limits = self.service.limits()
        self.carries_turns = self.service.algorithm.needs_turns

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        """The episode's output; an agent program's episode that drifted, one output per trained segment (verl's
        multi-output agent loop: each a row, the last one's reward and advantage carried by all)."""
        task = self.service.task(kwargs["extra_info"]["task_id"],
                                 "Write the dataset with: agentrl verl prepare RECIPE --run-dir DIR")
        generate = ServerGenerate(self.server_manager, sampling_params, self.tokenizer.eos_token_id)
        sampling = self.service.sampling(sampling_params["temperature"], sampling_params["top_p"],
                                         sampling_params["top_k"])
        trajectory = await self.service.play(task, generate, self.tokenizer, sampling=sampling, limits=self.limits)
        parts = training_segments(trajectory, self.service.algorithm.level)
        outputs = [self.output(part, generate.seconds if index == 0 else 0.0, generate.global_steps)
                   for index, part in enumerate(parts)]
        append_episode(self.episodes_file, episode_record(task, trajectory, outputs[0], len(parts) > 1))
        return outputs[0] if len(outputs) == 1 else outputs

    def output(self, trajectory: Trajectory, generate_seconds: float,
               global_steps: list[int] | None = None) -> AgentLoopOutput:
        """verl's output for ``trajectory``: the runner's tokens, its mask (zeroed when filtered) and reward.

        ``global_steps``: the weight versions that generated it (0 when the server reports none).
        """
        steps = global_steps or [0]
        self.check_fits(trajectory)
        keep = self.service.keeps(trajectory)
        verdict = trajectory.verdict
        return AgentLoopOutput(
            prompt_ids=trajectory.prompt_ids,
            response_ids=trajectory.response_ids,
            response_mask=trajectory.response_mask if keep else [0] * len(trajectory.response_mask),
            response_logprobs=trajectory.logprobs if self.rollout_config.calculate_log_probs else None,
            reward_score=trajectory.reward,
            num_turns=sum(message["role"] in TURN_ROLES for message in trajectory.messages),
            metrics=AgentLoopMetrics(generate_sequences=generate_seconds,
                                     tool_calls=max(trajectory.seconds - generate_seconds, 0.0)),
            extra_fields={
                "task_id": trajectory.task_id,
                "termination": trajectory.termination,
                "min_global_steps": min(steps),
                "max_global_steps": max(steps),
                "reward_extra_info": {"passed": float(bool(verdict and verdict.passed)),
                                      "hacked": float(bool(verdict and verdict.hacked)),
                                      "filtered": float(not keep)},
                **({TURNS_FIELD: TurnRecord.of(trajectory).as_fields()} if self.carries_turns else {}),
            },
        )

    def check_fits(self, trajectory: Trajectory) -> None:
        """verl pads to fixed prompt and response lengths and cannot truncate a multi-turn episode."""
        for part, ids, limit in (("prompt", trajectory.prompt_ids, self.rollout_config.prompt_length),
                                 ("response", trajectory.response_ids, self.rollout_config.response_length)):
            if len(ids) > limit:
                raise ValueError(f"task {trajectory.task_id}: the episode's {part} has {len(ids)} tokens, more than "
                                 f"verl's {part}_length {limit}; set data.max_{part}_length to at least "
                                 f"the recipe's rollout.max_context_tokens ({self.limits.max_context_tokens})")


def episode_record(task: Task, trajectory: Trajectory, output: AgentLoopOutput,
                   later_trained: bool = False) -> EpisodeRecord:
    """The episode log's line for ``trajectory`` as ``output`` hands it to verl (``later_trained``: with its later
    segments as rows beside it)."""
    verdict, extra, ended = trajectory.verdict, output.extra_fields, time.time()
    counts = EpisodeCounts.of(trajectory)
    return EpisodeRecord(
        split=task.split, weights_version=int(extra["min_global_steps"]), task_id=trajectory.task_id,
        termination=trajectory.termination, reward=float(trajectory.reward),
        passed=honest_pass(verdict), hacked=bool(verdict and verdict.hacked),
        filtered=bool(extra["reward_extra_info"]["filtered"]), prompt_ids=list(trajectory.prompt_ids),
        response_ids=list(trajectory.response_ids), policy_mask=list(trajectory.response_mask),
        logprobs=[float(x) for x in trajectory.logprobs], redundant=counts.redundant,
        drift=counts.drift, later_policy_tokens=sum(part.policy_tokens for part in trajectory.segments),
        later_trained=later_trained, started=ended - trajectory.seconds, ended=ended,
        teacher_gap=counts.teacher_gap, teacher_tokens=counts.teacher_tokens, teacher_seconds=counts.teacher_seconds)


def loop_class_name(environment_name: str) -> str:
    return "".join(part.title() for part in environment_name.split("_")) + "AgentLoop"


def register_agent_loops() -> list[str]:
    """Define and register a loop class per environment of agentrl's registry; returns the agent names."""
    names = []
    for entry in get_plugin_manager().registry("environment"):
        cls = type(loop_class_name(entry.record.name), (EpisodeAgentLoop,),
                   {"environment": entry.record.name, "__module__": __name__})
        globals()[cls.__name__] = cls
        names.append(agent_loop_name(entry.record.name))
        register(names[-1])(cls)
    return names


AGENT_LOOPS = register_agent_loops()
