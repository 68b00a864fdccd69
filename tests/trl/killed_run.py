"""``agentrl run`` in a process of its own, stopped by a real signal at a named moment: the kill tests' runner.

    python killed_run.py MOMENT AGENTRL_RUN_ARGUMENTS...

MOMENT is ``none`` or one of :data:`MOMENTS`, those at a step written ``NAME:STEP``. Each SIGKILLs the process
(``interrupt`` sends it SIGINT, a Ctrl-C) inside the real operation. The episodes are scripted
(:class:`conftest.ScriptedEpisodes`, a solver, a hacker, a staller and a solver per group), so every step has a
gradient and a resumed run can be held to an uninterrupted one exactly; the CLI, TRL's trainer, its checkpoints
and the run folder are the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

MOMENTS = {
    "checkpoint": "checkpoint STEP is half written: its model and optimizer, not its RNG or trainer state",
    "metrics": "step STEP's metrics row is half appended",
    "interrupt": "Ctrl-C (SIGINT) right after step STEP's metrics row",
    "truncate": "a resume's truncated metrics file is written and not yet renamed over the old one",
    "export": "the final weights are written, the tokenizer not yet",
}


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_in_checkpoint(step: int) -> None:
    from transformers import Trainer

    save_rng_state = Trainer._save_rng_state

    def killing(self: Any, output_dir: str) -> None:
        if self.state.global_step == step:
            die()
        save_rng_state(self, output_dir)

    Trainer._save_rng_state = killing


def stop_at_metrics(step: int, tear: bool) -> None:
    from agentrl_plugins.runs import rundir

    append_line = rundir.append_line

    def stopping(path: Path, row: dict[str, Any]) -> None:
        if path.name != "metrics.jsonl" or row["step"] != step:
            return append_line(path, row)
        if not tear:
            append_line(path, row)
            os.kill(os.getpid(), signal.SIGINT)
            return None
        line = json.dumps(row).encode()
        with open(path, "ab") as handle:
            handle.write(line[: len(line) // 2])
        die()

    rundir.append_line = stopping


def kill_in_truncation() -> None:
    from agentrl_plugins.runs.rundir import RunDir

    truncate_metrics = RunDir.truncate_metrics

    def killing(self: Any, last_step: int) -> None:
        os.replace = lambda *args, **kwargs: die()
        truncate_metrics(self, last_step)

    RunDir.truncate_metrics = killing  # type: ignore[method-assign]


def kill_in_export() -> None:
    from transformers import PreTrainedTokenizerBase

    save_pretrained = PreTrainedTokenizerBase.save_pretrained

    def killing(self: Any, folder: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(folder).name == "final.partial":
            die()
        return save_pretrained(self, folder, *args, **kwargs)

    PreTrainedTokenizerBase.save_pretrained = killing


def script_the_episodes() -> None:
    from conftest import STALL, ScriptedEpisodes

    import agentrl_trl.runner as runner
    from bugfix_gym import policies
    from bugfix_gym.families import FAMILIES

    scripts = {family.name: [policies.solver(family), policies.hacker(family), STALL, policies.solver(family)]
               for family in FAMILIES}
    runner.hf_generator_factory = lambda tokenizer: lambda model, seed: ScriptedEpisodes(model, tokenizer, scripts)


def main(moment: str, arguments: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
    name, _, step = moment.partition(":")
    if name not in (*MOMENTS, "none"):
        raise SystemExit(f"unknown moment {moment!r}; the moments: none, {', '.join(MOMENTS)}")
    script_the_episodes()
    if name == "checkpoint":
        kill_in_checkpoint(int(step))
    elif name in ("metrics", "interrupt"):
        stop_at_metrics(int(step), tear=name == "metrics")
    elif name == "truncate":
        kill_in_truncation()
    elif name == "export":
        kill_in_export()
    from agentrl_plugins.cli import main as agentrl

    sys.argv = ["agentrl", "run", *arguments]
    agentrl()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
