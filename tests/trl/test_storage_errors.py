"""A real ``agentrl run`` into a read-only folder (a read-only bind mount, which holds for root too): a clear
error naming the folder, why and the space left, before any training, and no traceback."""

from __future__ import annotations

import subprocess
import sys

from agentrl_plugins.testing import read_only_command


def test_a_run_into_a_read_only_folder_is_said_before_it_trains(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    folder = tmp_path / "runs"
    folder.mkdir()
    command = [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "trl", "--model",
               str(tmp_path / "model"), "--steps", "1", "--out", str(folder / "run")]
    done = subprocess.run(read_only_command(folder, command), capture_output=True, text=True, timeout=300)
    said = " ".join(done.stderr.split())  # the console wraps long lines
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"could not write {folder / 'run'}: the file system is read-only (" in said and "MiB free of" in said
    assert "Traceback" not in said
    assert not (folder / "run").exists()
