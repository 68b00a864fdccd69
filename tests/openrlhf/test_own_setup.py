"""OpenRLHF from your own command: the page's two commands as written (a run folder, then OpenRLHF's own
``train_ppo_ray`` with a flag of yours)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from agentrl_plugins.runs.rundir import RunDir

PAGE = Path(__file__).parents[2] / "docs" / "pages" / "own-setup" / "openrlhf.md"


def test_the_pages_commands_train_and_fill_the_run_folder(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "models" / "my-model")
    tokenizer.save_pretrained(tmp_path / "models" / "my-model")
    block = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                                          f"{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    run = RunDir(tmp_path / "runs" / "mine")
    assert [row.step for row in run.read_metrics()] == [0, 1]
    assert run.report_file.is_file() and (run.path / "final" / "config.json").is_file()
    assert run.run_info()["config_changes"] == [], "train_ppo_ray.sh already agrees with the recipe"
    assert list((run.path / "tensorboard" / "mine").glob("events.out.tfevents.*")), \
        "your own flag (the run name OpenRLHF names its TensorBoard folder after) is kept"
