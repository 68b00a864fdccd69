"""OpenRLHF from your own command: the page's commands as written. The first (``agentrl openrlhf prepare``) runs
here and writes the run folder and ``train_ppo_ray.sh``. (``train_ppo_ray.sh`` with a flag of yours trains for
real in ``test_cpu_training.py``.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from agentrl_plugins.runs.rundir import RunDir

PAGE = Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "openrlhf.md"


def test_the_pages_prepare_writes_the_run_folder_and_the_script(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "models" / "my-model")
    tokenizer.save_pretrained(tmp_path / "models" / "my-model")
    block = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)[1]
    prepare, train = [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", prepare], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert shlex.split(train)[:2] == ["sh", "runs/mine/train_ppo_ray.sh"]
    run = RunDir(tmp_path / "runs" / "mine")
    assert run.load_recipe().train.steps == 1
    rows = [json.loads(line) for line in (run.path / "prompts.jsonl").read_text().splitlines()]
    assert len(rows) == 2, "train.steps x rollout.tasks_per_step prompts"
    script = (run.path / "train_ppo_ray.sh").read_text().splitlines()[-1]
    assert script.startswith("exec env RAY_RUNTIME_ENV_HOOK=") and script.endswith(' "$@"')
    assert "--logger.tensorboard_dir" in script and str(tmp_path / "models" / "my-model") in script
