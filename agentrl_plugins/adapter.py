"""What a framework adapter provides: the recipe in the framework's terms, and a way to run it."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, Sequence

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.user_config import Decided

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

RAY_ADDRESS_ENV = "RAY_ADDRESS"
NO_WARM_UP = "adapter: the recipe's schedule has no warm-up (a warm-up is refused in verl and OpenRLHF alike)"
NO_GROUP_REFILL = ("adapter: the recipe's filtering section decides which episodes train; DAPO-style group filtering "
                   "drops groups and samples new prompts in their place, beyond train.steps x rollout.tasks_per_step "
                   "(refused in verl and OpenRLHF alike)")
"""Why each adapter decides a framework's own warm-up and group filtering off: the same refusal in both."""

MappingStatus = Literal["native", "mapped", "injected", "patched", "approximated"]


@dataclass(frozen=True)
class ComponentMapping:
    """How one recipe key reaches the framework, and how faithfully.

    ``native`` holds the framework settings this key decides, by name: an adapter declares each once, here,
    and derives its native configuration from the rows (:func:`decided_settings`).
    """

    key: str
    value: Any
    setting: str
    status: MappingStatus
    note: str = ""
    native: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class FrameworkConfig:
    """A recipe rendered for one framework: its native settings plus the mapping table."""

    framework: str
    native: dict[str, Any]
    mappings: list[ComponentMapping]
    command: list[str] = field(default_factory=list)
    setup: str = ""
    """What to do before ``command`` (which variant it is, what it needs written first), printed with it."""


@dataclass
class RunOptions:
    """Everything ``agentrl run`` passes to an adapter besides the recipe."""

    run_dir: Path | None = None
    model: str | None = None
    resume: Path | None = None
    dry_run: bool = False
    report_to: tuple[str, ...] = ()
    """Experiment loggers by name (:data:`agentrl_plugins.loggers.LOGGERS`); empty for none."""
    recipe_args: tuple[str, ...] = ()
    """The recipe as the user named it (``RECIPE [--profile P] [-o KEY=VALUE]...``), for the commands an adapter
    prints to reproduce it."""
    ranks: int | None = None
    """Data-parallel trainer ranks (verl, OpenRLHF): processes that each train on a share of every step; None: the
    adapter's default (one per GPU, one on a CPU)."""
    nodes: int = 1
    """Ray nodes the ranks spread over, evenly; more than one joins the running cluster ``RAY_ADDRESS`` names."""
    extra: dict[str, Any] = field(default_factory=dict)

    def ranks_per_node(self, default: int = 1) -> int:
        """The trainer ranks on each node (``default`` without ``--ranks``), after checking that the layout can be
        launched."""
        ranks = default * self.nodes if self.ranks is None else self.ranks
        if ranks < 1 or self.nodes < 1:
            raise AgentRLError(f"--ranks {ranks} --nodes {self.nodes}: both count processes and nodes, from 1")
        if ranks % self.nodes:
            raise AgentRLError(f"--ranks {ranks} does not spread evenly over --nodes {self.nodes}: verl and "
                               "OpenRLHF place the same number of trainer ranks on every node")
        if self.nodes > 1 and ray_address() is None:
            raise AgentRLError(f"--nodes {self.nodes} trains on a running Ray cluster: start it (`ray start --head` "
                               "here, `ray start --address HEAD:PORT` on each other node) and set RAY_ADDRESS to "
                               "its address; the run folder must be on a filesystem every node sees")
        return ranks // self.nodes

    def prepare_command(self, framework: str, run_dir: Path, *flags: str) -> str:
        """The ``agentrl FRAMEWORK prepare`` line that writes this run's folder: the recipe as the user named it,
        the model, the loggers, the trainer ranks and the adapter's own ``flags``."""
        line = ["agentrl", framework, "prepare", *self.recipe_args, "--run-dir", str(run_dir)]
        if self.model:
            line += ["--model", self.model]
        if self.ranks is not None:
            line += ["--ranks", str(self.ranks)]
        if self.nodes != 1:
            line += ["--nodes", str(self.nodes)]
        if self.report_to:
            line += ["--report-to", ",".join(self.report_to)]
        return shlex.join([*line, *flags])


def ray_address() -> str | None:
    """The running Ray cluster a launch joins (``RAY_ADDRESS``, as Ray reads it); None: the framework starts one."""
    return os.environ.get(RAY_ADDRESS_ENV) or None


LEAN_LOCAL_RAY_ENV = {"RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0"}
"""Ray settings for the local cluster a CPU launch starts: no idle worker processes started ahead of need (each
imports Ray's worker, seconds of a few cores' time that the run's own actors wait behind)."""


def lean_local_ray_env() -> dict[str, str]:
    """:data:`LEAN_LOCAL_RAY_ENV` less the variables the user's environment sets (theirs win); nothing when the
    launch joins a running cluster, whose settings are its own."""
    if ray_address() is not None:
        return {}
    return {name: value for name, value in LEAN_LOCAL_RAY_ENV.items() if name not in os.environ}


def correction_parameter_rows(recipe: Recipe, setting: str, status: MappingStatus,
                              plugin_manager: PluginManager | None = None) -> list[ComponentMapping]:
    """The rows of ``correction.cap``, ``.low`` and ``.high``: those the recipe's correction takes reach ``setting``
    with ``status``, the others are marked unused."""
    from agentrl_plugins.algorithm import CORRECTION_PARAMETERS, RecipeAlgorithm

    used = RecipeAlgorithm.from_recipe(recipe, plugin_manager).correction_params()
    return _parameter_rows("correction", recipe.correction, ("correction", recipe.correction.name),
                           CORRECTION_PARAMETERS, used, setting, status)


def advantage_parameter_rows(recipe: Recipe, setting: str, status: MappingStatus,
                             plugin_manager: PluginManager | None = None) -> list[ComponentMapping]:
    """The rows of ``advantage.gamma`` and ``.step_weight``: those the recipe's estimator takes reach ``setting``
    with ``status``, the others are marked unused."""
    from agentrl_plugins.algorithm import ADVANTAGE_PARAMETERS, RecipeAlgorithm

    used = RecipeAlgorithm.from_recipe(recipe, plugin_manager).advantage_params()
    return _parameter_rows("advantage", recipe.advantage, ("estimator", recipe.advantage.estimator),
                           ADVANTAGE_PARAMETERS, used, setting, status)


def turn_reward_rows(recipe: Recipe, setting: str, status: MappingStatus,
                     plugin_manager: PluginManager | None = None) -> list[ComponentMapping]:
    """The rows of ``turn_reward.name`` and ``.signal``: the episode runner at ``setting`` adds the turn reward to
    each turn's, with ``status``; the signal is read by the turn reward or marked unused."""
    from agentrl_plugins.turn_rewards import TURN_REWARD_PARAMETERS, turn_reward_params

    section = recipe.turn_reward
    used = turn_reward_params(recipe, plugin_manager)
    note = ("no turn reward" if section.name == "none" else
            "the core episode runner adds it to each turn's reward" + (f", discounted by advantage.gamma "
                                                                       f"= {recipe.advantage.gamma}"
                                                                       if "gamma" in used else ""))
    return [ComponentMapping("turn_reward.name", section.name, setting, status, note),
            *_parameter_rows("turn_reward", section, ("turn reward", section.name),
                             TURN_REWARD_PARAMETERS, used, setting, status)]


def distillation_rows(recipe: Recipe, setting: str, status: MappingStatus) -> list[ComponentMapping]:
    """The rows of the ``distillation`` section: the episode service scores each episode with the teacher and the
    advantage step at ``setting`` adds the signal, with ``status``."""
    section = recipe.distillation
    if not section.enabled:
        return [ComponentMapping(f"distillation.{key}", getattr(section, key), "-", "native",
                                 "no teacher" if key == "teacher" else "unused without distillation.teacher")
                for key in ("teacher", "divergence", "coef", "task_reward")]
    where = "the episode service (the teacher in the rollout process, batched across episodes)"
    return [
        ComponentMapping("distillation.teacher", section.teacher, where, "injected",
                         "scores every response token in the student's own token ids"),
        ComponentMapping("distillation.divergence", section.divergence, setting, status,
                         "-coef * (log p_sampler - log p_teacher) per policy token, added to its advantage"),
        ComponentMapping("distillation.coef", section.coef, setting, status),
        ComponentMapping("distillation.task_reward", section.task_reward, setting, status,
                         "the estimator's advantages kept beside the signal" if section.task_reward
                         else "the estimator's advantages dropped: the teacher's signal alone"),
    ]


def _parameter_rows(section: str, values: Any, component: tuple[str, str], keys: Sequence[str],
                    used: Mapping[str, Any], setting: str, status: MappingStatus) -> list[ComponentMapping]:
    """One row per parameter key of ``section``: read by the ``component`` (its kind and name) at ``setting``, or
    unused by it."""
    kind, name = component
    return [ComponentMapping(f"{section}.{key}", getattr(values, key), setting, status, f"read by {name}")
            if key in used else ComponentMapping(f"{section}.{key}", getattr(values, key), "-", "native",
                                                 f"unused by this {kind}")
            for key in keys]


def decided_settings(mappings: Sequence[ComponentMapping], requirements: Sequence[Decided] = ()) -> list[Decided]:
    """Every native setting the rows decide (with the recipe key that decides it), then the adapter's own
    ``requirements``; a setting decided twice is a declaration error."""
    decided = [Decided(name, value, f"{row.key}={row.value!r}")
               for row in mappings for name, value in row.native.items()]
    decided += list(requirements)
    names = [setting.name for setting in decided]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"settings decided by more than one mapping row: {twice}")
    return decided


class FrameworkAdapter(Protocol):
    def describe(self, recipe: Recipe) -> FrameworkConfig: ...

    def run(self, recipe: Recipe, options: RunOptions) -> Path | None: ...
