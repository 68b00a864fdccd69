"""A write that fails for want of room or permission is said as such, with the folder and the space left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.journal import append_line
from agentrl_plugins.runs.storage import storage_error, storage_errors_said
from agentrl_plugins.testing import FULL_DISK, full_disk_link, read_only_command


@pytest.fixture
def full_file(tmp_path):
    return full_disk_link(tmp_path / "metrics.jsonl")


def test_a_full_disk_names_the_file_and_the_space_left(full_file):
    with pytest.raises(OSError) as raised:
        append_line(full_file, {"step": 0})
    message = str(storage_error(raised.value))
    assert message.startswith(f"could not write {full_file}: the disk is full (") and "MiB free of" in message


def test_a_checkpoint_written_short_by_torch_asks_about_the_disk(full_file, tmp_path):
    with pytest.raises(RuntimeError) as raised:
        torch.save({"weights": torch.zeros(100_000)}, full_file)
    message = str(storage_error(raised.value, tmp_path))
    assert f"a file under {tmp_path} was written short" in message and "is the disk full?" in message


def test_a_folder_that_cannot_be_made_is_said_and_other_errors_pass_through():
    with pytest.raises(OSError) as raised:
        Path("/sys/agentrl-run").mkdir()
    assert str(storage_error(raised.value)).startswith("could not write /sys/agentrl-run: ")
    assert storage_error(ValueError("no")) is None and storage_error(RuntimeError("CUDA out of memory")) is None


def test_the_command_line_says_a_full_disk_instead_of_a_traceback():
    if not FULL_DISK.exists():
        pytest.skip(f"no {FULL_DISK} here")
    with FULL_DISK.open("w") as full:
        result = subprocess.run([sys.executable, "-m", "agentrl_plugins", "recipes", "show", "grpo", "--json"],
                                stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2 and "the disk is full" in result.stderr and "Traceback" not in result.stderr


def test_inside_a_trainer_a_failed_write_is_said_and_raised_as_the_clear_error(full_file, tmp_path, capsys):
    with pytest.raises(AgentRLError) as raised, storage_errors_said(tmp_path):
        append_line(full_file, {"step": 0})
    assert str(raised.value).startswith(f"could not write {full_file}: the disk is full (")
    assert isinstance(raised.value.__cause__, OSError), "the failure stays the clear error's cause"
    assert capsys.readouterr().err == f"agentrl: error: {raised.value}\n"
    with pytest.raises(ValueError), storage_errors_said(tmp_path):
        raise ValueError("not a write")
    assert capsys.readouterr().err == ""


APPEND = """
import sys
from pathlib import Path
from agentrl_plugins.runs.journal import append_line
from agentrl_plugins.runs.storage import storage_error
try:
    append_line(Path(sys.argv[1]), {"step": 0})
except OSError as error:
    print(storage_error(error))
"""


def test_a_read_only_folder_names_the_file_and_the_space_left(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    target = folder / "metrics.jsonl"
    done = subprocess.run(read_only_command(folder, [sys.executable, "-c", APPEND, str(target)]),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"could not write {target}: the file system is read-only (") and \
        "MiB free of" in done.stdout
    assert not target.exists()
