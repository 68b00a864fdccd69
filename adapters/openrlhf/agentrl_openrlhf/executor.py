"""OpenRLHF's agent executor for agentrl recipes: each call plays one episode through the core episode runner.

The dataset's ``label`` is the task id (``agentrl openrlhf dataset`` writes it); the prompt
text is only echoed back, since the runner renders the task's prompt with the tokenizer's chat
template itself. The verifier's reward is the episode's reward. Policy tokens are exactly the
``action_ranges``; a compact-filtered episode returns ``action_ranges=[]`` and so carries no loss. For a
turn- or token-level estimator the label also carries the episode's turns. An agent program's later segments
(its conversation stopped extending the sampled tokens) ride in the episode's response, each a response of its own
with the episode's reward, termination and filtering (:mod:`agentrl_openrlhf.segments` makes them rows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from openrlhf.utils.agent import AgentExecutorBase

from agentrl_plugins.episode_service import EpisodeService
from agentrl_plugins.runs.evaluate import honest_pass
from agentrl_plugins.runs.figures import EpisodeCounts
from agentrl_plugins.segments import training_segments
from agentrl_plugins.types import Trajectory

from agentrl_openrlhf.engine import engine_generate
from agentrl_openrlhf.recipe_env import recipe_from_env
from agentrl_openrlhf.segments import SEGMENT_LOG, SEGMENTS
from agentrl_openrlhf.terminations import termination_logs
from agentrl_openrlhf.turn_label import turn_label


def executor_output(trajectory: Trajectory, prompt: Any, label: Any, images: Any, keep: bool,
                    carry_turns: bool = False, later: Sequence[Trajectory] = (),
                    segment: bool = False) -> dict[str, Any]:
    """OpenRLHF's executor dict for one episode; ``keep=False`` removes it from the loss; ``carry_turns`` attaches
    its turns to the label (:mod:`agentrl_openrlhf.turn_label`), for a turn-level estimator or distillation's
    per-token signal; ``later``: the later
    segments to train, each in a dict of its own under :data:`~agentrl_openrlhf.segments.SEGMENTS`; ``segment``:
    this dict is one of those."""
    offset, counts = len(trajectory.prompt_ids), EpisodeCounts.of(trajectory)
    spans = [(offset + start, offset + end) for start, end in trajectory.turn_spans if end > start]
    rows = [executor_output(replace(part, reward=trajectory.reward, verdict=trajectory.verdict,
                                    termination=trajectory.termination), prompt, label, images, keep, carry_turns,
                            segment=True)
            for part in later]
    return {
        "prompt": prompt,
        "label": turn_label(label, trajectory) if carry_turns else label,
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
            "policy_tokens": float(counts.policy_tokens),  # every segment's, as sampled
            "redundant_turns": float(counts.redundant),
            "drift": float(counts.drift),
            "teacher_gap": counts.teacher_gap,
            "teacher_tokens": float(counts.teacher_tokens),
            "teacher_seconds": counts.teacher_seconds,
            SEGMENT_LOG: float(segment),
            **termination_logs(trajectory.termination),
        },
        **({SEGMENTS: rows} if rows else {}),
    }


class AgentExecutor(AgentExecutorBase):
    """Plays the task named by ``label`` with the recipe in ``AGENTRL_OPENRLHF_RECIPE``.

    Sampling (temperature, top-p, top-k) is OpenRLHF's, so rollouts and evaluation sample as
    its command line says; turns, per-turn tokens and the timeout are the recipe's, and the
    context budget is the smaller of the recipe's and OpenRLHF's ``max_length``.
    """

    def __init__(self):
        self.service = EpisodeService.from_recipe(recipe_from_env())
        self.carry_turns = self.service.algorithm.needs_turns

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        task = self.service.task(label, "Write the prompt dataset with `agentrl openrlhf dataset`.")
        sampling = self.service.sampling(sampling_params.temperature, sampling_params.top_p, sampling_params.top_k)
        trajectory = await self.service.play(task, engine_generate(llm_engine, sampling_params), hf_tokenizer,
                                             sampling=sampling, limits=self.service.limits(max_length))
        later = training_segments(trajectory, self.service.algorithm.level)[1:]
        return executor_output(trajectory, prompt, label, images, self.service.keeps(trajectory), self.carry_turns,
                               later)
