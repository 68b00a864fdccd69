"""Helpers for testing plugins: a byte-level chat tokenizer, scripted generation, a fresh environment, the
mapping contract every framework adapter keeps, a Ray cluster of several nodes on one machine, and a distillation
teacher with the log-probs it should give.

Like pytest's ``pytester``, these are part of the public API so that plugin
authors can test an environment or verifier the way the core tests its own,
and test their distribution as a user installs it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
import venv
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, get_args

from agentrl_plugins.adapter import FrameworkAdapter, MappingStatus, decided_settings
from agentrl_plugins.recipe_schema import SECTIONS, Recipe
from agentrl_plugins.scripted import ByteChatTokenizer as ByteChatTokenizer  # re-exported for plugin authors
from agentrl_plugins.scripted import ScriptedGenerate as ScriptedGenerate
from agentrl_plugins.user_config import same


def fresh_environment(root: Path, *projects: Path) -> Path:
    """A new virtual environment in ``root`` that sees this environment's packages, with ``projects``
    pip-installed into it (without dependencies); returns its Python. The installed plugins are visible
    there and not here, as on a user's machine."""
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    site_packages = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    (site_packages / "outer_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    if projects:
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        *map(str, projects)], check=True)
    return python


def recipe_keys() -> list[str]:
    """Every key of the recipe schema, ``section.key``."""
    return [f"{section}.{field.name}" for section, cls in SECTIONS.items() for field in dataclasses.fields(cls)]


def mapping_problems(adapter: FrameworkAdapter, recipe: Recipe) -> list[str]:
    """What breaks the mapping contract in ``adapter.describe(recipe)``; empty when it holds.

    The contract: exactly one row per recipe key, with the recipe's value and a known status, and no
    framework setting decided by two rows (:func:`~agentrl_plugins.adapter.decided_settings`).
    """
    rows = adapter.describe(recipe).mappings
    counts = Counter(row.key for row in rows)
    expected = recipe_keys()
    problems = [f"no row for {key}" for key in expected if key not in counts]
    problems += [f"{count} rows for {key}" for key, count in counts.items() if count > 1]
    problems += [f"a row for {key}, which is not a recipe key" for key in counts if key not in expected]
    for row in rows:
        section, _, name = row.key.partition(".")
        recipes = getattr(getattr(recipe, section), name) if row.key in expected else None
        if row.key in expected and not same(row.value, recipes):
            problems.append(f"{row.key}: the row says {row.value!r}, the recipe {recipes!r}")
        if row.status not in get_args(MappingStatus):
            problems.append(f"{row.key}: unknown status {row.status!r}")
    try:
        decided_settings(rows)
    except ValueError as error:
        problems.append(str(error))
    return problems


CLUSTER_NODE_MEMORY = 256 * 2**20
"""Object store bytes of each node of :func:`local_ray_cluster` (Ray's default would take 30% of memory each)."""


RAY_STARTED = "Ray runtime started"
"""What ``ray start`` prints once its node is up."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ray_start(words: list[str], env: dict[str, str], log: Path, timeout_s: float = 120.0) -> subprocess.Popen[bytes]:
    """``ray start WORDS --block``, returned once its node is up (its output in ``log``)."""
    ray = Path(sys.executable).with_name("ray")
    with log.open("wb") as out:
        node = subprocess.Popen([str(ray), "start", *words, "--disable-usage-stats", "--block"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while RAY_STARTED not in log.read_text(errors="replace"):
        if node.poll() is not None or time.monotonic() > deadline:
            node.kill()
            raise RuntimeError(f"ray start {' '.join(words)} did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.5)
    return node


@contextmanager
def local_ray_cluster(nodes: int, gpus_per_node: int | None, cpus_per_node: int = 8,
                      token_auth: bool = True) -> Iterator[str]:
    """A running Ray cluster of ``nodes`` nodes on this machine, started as a user starts one: ``ray start --head``,
    then ``ray start --address HEAD`` for each other node, each with ``gpus_per_node`` ``GPU`` slots (on a CPU, the
    slots verl's and OpenRLHF's CPU backends place their ranks by; None: ``ray start`` without ``--num-gpus``) and,
    with ``token_auth``, Ray's token authentication (the default of ``ray start`` wherever ``~/.ray/auth_token``
    exists; generated here when missing). Yields ``HOST:PORT`` for ``RAY_ADDRESS``; every node stops on exit.
    The head's files go to a folder of its own, so that no ``ray.init()`` without an address finds it."""
    env = {**os.environ, "RAY_AUTH_MODE": "token" if token_auth else "disabled"}
    env.pop("RAY_ADDRESS", None)
    if token_auth:
        ray = Path(sys.executable).with_name("ray")
        subprocess.run([str(ray), "get-auth-token", "--generate"], env=env, check=True, capture_output=True)
    folder = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    address = f"127.0.0.1:{_free_port()}"
    resources = ["--num-cpus", str(cpus_per_node), "--object-store-memory", str(CLUSTER_NODE_MEMORY),
                 *(["--num-gpus", str(gpus_per_node)] if gpus_per_node is not None else [])]
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(_ray_start(["--head", "--port", address.split(":")[1],
                                   "--temp-dir", str(folder), "--include-dashboard", "false", *resources],
                                  env, folder / "head.log"))
        for index in range(1, nodes):
            started.append(_ray_start(["--address", address, *resources], env, folder / f"node{index}.log"))
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def sharpened_teacher(model: Any, tokenizer: Any, folder: Path, factor: float = 3.0) -> Path:
    """Save a copy of ``model`` with its output layer times ``factor`` (a sharper distribution, far from the
    student's) and ``tokenizer`` as a local model folder: a distillation teacher, named as a user names a
    checkpoint."""
    import copy

    import torch

    teacher = copy.deepcopy(model)
    with torch.no_grad():
        teacher.get_output_embeddings().weight.mul_(factor)
    teacher.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def forward_logprobs(model: Any, prompt_ids: Sequence[int], response_ids: Sequence[int]) -> Any:
    """``model``'s log-prob of each response token, from one plain forward of the whole sequence (float32)."""
    import torch

    ids = torch.tensor([[*prompt_ids, *response_ids]])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1:-1].float().log_softmax(-1)
    return logits.gather(-1, ids[0, len(prompt_ids):, None])[:, 0]


def tensorboard_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """Every scalar in the event files under ``folder``: tag -> step -> value (a later folder's win)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars: dict[str, dict[int, float]] = {}
    for events in sorted({path.parent for path in folder.rglob("events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            scalars.setdefault(tag, {}).update({e.step: e.value for e in accumulator.Scalars(tag)})
    return scalars


def wandb_records(path: Path) -> list[Any] | None:
    """The protobuf ``Record``s of one ``.wandb`` file: a LevelDB-style log (a 7-byte ``:W&B`` header, 32 KiB
    blocks of chunks, each with a 7-byte header: checksum, length, type 1 full / 2 first / 3 middle / 4 last;
    W&B 0.31 ships no Python reader of its own). None while W&B's service is still writing it (a chunk cut short,
    a record that does not parse yet)."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return None
    position, chunks, records = 7, [], []
    while position + 7 <= len(data):
        if 32768 - position % 32768 < 7:
            position += 32768 - position % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[position:position + 7])
        if position + 7 + length > len(data):
            return None
        chunks.append(data[position + 7:position + 7 + length])
        position += 7 + length
        if kind in (1, 4):
            try:
                records.append(wandb_internal_pb2.Record.FromString(b"".join(chunks)))
            except DecodeError:
                return None
            chunks = []
    return records


def wandb_scalars(folder: Path, step_key: str = "train/global_step",
                  timeout_s: float = 60.0) -> dict[str, dict[int, float]]:
    """Every history value of the offline W&B run under ``folder``: key -> step (the history's ``step_key``:
    TRL and OpenRLHF log ``train/global_step``, verl W&B's own ``_step``) -> value. W&B's service writes the file
    after ``wandb.finish()`` returns: this reads it until it holds the run's exit record."""
    deadline = time.monotonic() + timeout_s
    (path,) = folder.glob("offline-run-*/run-*.wandb")
    while (records := wandb_records(path)) is None or not any(
            record.WhichOneof("record_type") == "exit" for record in records):
        assert time.monotonic() < deadline, f"{path} holds no complete exit record after {timeout_s} s"
        time.sleep(0.5)
    scalars: dict[str, dict[int, float]] = {}
    for record in records:
        if record.WhichOneof("record_type") == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            for key, value in row.items():
                if isinstance(value, (int, float)) and step_key in row:
                    scalars.setdefault(key, {})[int(row[step_key])] = value
    return scalars


def engine_overrides() -> list[str]:
    """``-o`` items that let a recipe run in an environment without vLLM (the recipes' default engine): the core's
    Hugging Face sampler there, nothing where vLLM is installed."""
    import importlib.util

    return [] if importlib.util.find_spec("vllm") else ["rollout.engine=hf"]


def marked_processes(marker: str) -> dict[int, str]:
    """Live processes whose environment holds ``marker`` (a ``NAME=value`` the test set on a command it started:
    every process of that command's tree inherits it, Ray's daemons and workers included), with their command
    lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace")
        except OSError:
            pass
    return found


def settled_leftovers(marker: str, settle_s: float) -> dict[int, str]:
    """``marker``'s processes (:func:`marked_processes`) still alive ``settle_s`` from now, each then killed (the
    test started them, so a failing test leaves nothing behind)."""
    deadline = time.monotonic() + settle_s
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = marked_processes(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def new_process_marker() -> str:
    """A fresh ``NAME=value`` to set on a command whose process tree :func:`marked_processes` then finds."""
    return f"AGENTRL_TEST_RUN={uuid.uuid4().hex}"


def killed_run_leftovers(command: Sequence[str], env: dict[str, str], started: str | Callable[[], bool],
                         timeout_s: float = 300, settle_s: float = 15) -> dict[int, str]:
    """Start ``command`` (``agentrl run ...``), wait for a process whose command line holds ``started`` (a Ray
    actor's ``ray::`` name) or for ``started()`` to be true (a moment of the run seen from outside: a file
    written), ``kill -9`` the command, and return its tree's processes still alive ``settle_s`` later
    (:func:`settled_leftovers`)."""
    marker = new_process_marker()
    name, value = marker.split("=")
    process = subprocess.Popen(list(command), env={**env, name: value}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while not (started() if callable(started) else
                   any(started in line for line in marked_processes(marker).values())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the moment {started!r} did not come (the command exited {process.returncode})")
            time.sleep(0.2)
    finally:
        process.kill()
        process.wait()
    return settled_leftovers(marker, settle_s)


FULL_DISK = Path("/dev/full")
"""Every write to it fails with ENOSPC: a full disk without filling one."""


def full_disk_link(path: Path) -> Path:
    """``path`` as a link to :data:`FULL_DISK` (a test is skipped where there is none): writes to it find the disk
    full."""
    import pytest

    if not FULL_DISK.exists():
        pytest.skip(f"no {FULL_DISK} here")
    path.symlink_to(FULL_DISK)
    return path


def read_only_command(folder: Path, command: Sequence[str]) -> list[str]:
    """``command`` run with ``folder`` mounted read-only (a bind mount in a user and mount namespace of its own, so
    that it holds for root too); a test is skipped where this machine allows no such namespace."""
    import pytest

    mounted = shlex.join(["mount", "--bind", str(folder), str(folder)])
    read_only = shlex.join(["mount", "-o", "remount,bind,ro", str(folder)])
    script = f"{mounted} && {read_only} && exec {shlex.join(command)}"
    wrapped = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]
    probe = subprocess.run([*wrapped[:-1], f"{mounted} && {read_only}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no read-only bind mount here: {probe.stderr.strip()[-200:]}")
    return wrapped
