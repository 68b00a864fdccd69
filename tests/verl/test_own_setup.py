"""verl from your own command: the page's commands as written. The first (``agentrl verl prepare``) runs here and
writes the run folder and ``main_ppo.sh``; the page's table for a contradicting override is what the rule
says for verl's own config composed from that script's command plus the override. (``main_ppo.sh`` with an
override of yours trains for real in ``test_cpu_training.py``.)"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.user_config import ConfigConflictError

from agentrl_verl.own_config import reconcile_config

PAGE = Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "verl.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), re.S)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, model, tokenizer) -> RunDir:
    """The page's prepare command, run as written in a folder holding "your model" (a fresh TinyAgent)."""
    cwd = tmp_path_factory.mktemp("own")
    model.save_pretrained(cwd / "models" / "my-model")
    tokenizer.save_pretrained(cwd / "models" / "my-model")
    prepare, train = [line for line in blocks("bash")[1].replace("\\\n", " ").splitlines() if line.strip()]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", prepare], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert shlex.split(train)[:2] == ["bash", "runs/mine/main_ppo.sh"]
    return RunDir(cwd / "runs" / "mine")


def test_the_pages_prepare_writes_the_run_folder_and_the_script(prepared):
    assert prepared.load_recipe().train.steps == 1
    assert {path.name for path in (prepared.path / "data").iterdir()} == {"train.parquet", "held_out.parquet"}
    script = (prepared.path / "main_ppo.sh").read_text().splitlines()
    assert script[-1].startswith("exec env ") and script[-1].endswith(' "$@"')
    assert "python -m verl.trainer.main_ppo" in script[-1] and "trainer.logger=[console,tensorboard]" in script[-1]


def test_the_pages_contradicting_override_gets_the_pages_table(prepared):
    words = shlex.split(prepared.path.joinpath("main_ppo.sh").read_text().splitlines()[-1])
    overrides = words[words.index("verl.trainer.main_ppo") + 1:-1]
    (override,) = shlex.split(blocks("bash")[2])[2:]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=[*overrides, override])
    OmegaConf.resolve(config)
    with pytest.raises(ConfigConflictError) as error:
        reconcile_config(config, prepared.load_recipe())
    (page,) = [block.splitlines() for block in blocks("text") if block.startswith("agentrl_plugins.")]
    assert page[0] == f"{type(error.value).__module__}.{type(error.value).__name__}: {str(error.value).splitlines()[0]}"
    assert page[1:] == str(error.value).splitlines()[1:]
