"""A write that fails in one of Ray's workers (verl's FSDP worker saving a checkpoint, its TaskRunner appending a
row) reaches the trainer as Ray's task error; the clear error of the full disk is found in what it carries."""

from __future__ import annotations

import pytest
import torch
from ray.exceptions import RayTaskError

from agentrl_plugins.runs.journal import append_line
from agentrl_plugins.runs.storage import storage_error
from agentrl_plugins.testing import full_disk_link


def as_ray_raises_it(error: BaseException) -> BaseException:
    """``error`` as ``ray.get`` raises it in the caller: Ray's own ``RayTaskError(...)`` of the remote error."""
    return RayTaskError("save_checkpoint", "Traceback (most recent call last): ...", error).as_instanceof_cause()


@pytest.fixture
def full_file(tmp_path):
    return full_disk_link(tmp_path / "model_world_size_1_rank_0.pt")


def test_a_full_disk_in_a_ray_worker_is_said_with_its_file(full_file):
    with pytest.raises(OSError) as raised:
        append_line(full_file, {"step": 0})
    remote = as_ray_raises_it(raised.value)
    assert isinstance(remote, OSError) and remote.errno is None, "Ray's copy of the class carries no errno"
    assert str(storage_error(remote)).startswith(f"could not write {full_file}: the disk is full (")


def test_a_checkpoint_written_short_in_a_ray_worker_asks_about_the_disk(full_file, tmp_path):
    with pytest.raises(RuntimeError) as raised:
        torch.save({"weights": torch.zeros(100_000)}, full_file)
    message = str(storage_error(as_ray_raises_it(raised.value), tmp_path))
    assert f"a file under {tmp_path} was written short" in message and "is the disk full?" in message
