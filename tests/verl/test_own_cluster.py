"""Your own Ray cluster, started as Ray's docs say (``ray start --head``), joined by verl's command: token
authentication on (``ray start``'s default wherever a local Ray run left ``~/.ray/auth_token``) and off, a CPU
cluster started without ``--num-gpus``, and a command prepared before ``RAY_ADDRESS`` was set. The two-node
training runs on a ``ray start`` cluster are in ``test_data_parallel.py``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from conftest import cpu_run_env
from omegaconf import OmegaConf

from agentrl_plugins.adapter import LEAN_LOCAL_RAY_ENV
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.ray_cluster import join_cluster
from agentrl_plugins.testing import local_ray_cluster
from agentrl_plugins.user_config import own_words

from agentrl_verl.cluster import fit_cluster
from agentrl_verl.own_config import typed_overrides

JOIN = """
import sys
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.runs.ray_cluster import join_cluster
try:
    print(join_cluster(sys.argv[1], "verl", int(sys.argv[2]), "its trainer ranks"))
except AgentRLError as error:
    print("refused:", error)
"""


def joined(address: str, slots: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
    """:func:`join_cluster` in a fresh process (it turns on Ray's token mode process-wide), with ``env``."""
    clean = {key: value for key, value in os.environ.items() if key not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    return subprocess.run([sys.executable, "-c", JOIN, address, str(slots)], env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def token_head():
    """A one-node cluster with token authentication and no ``--num-gpus``: what a CPU user's ``ray start --head``
    gives."""
    with local_ray_cluster(nodes=1, gpus_per_node=None, token_auth=True) as address:
        yield address


def test_a_cluster_with_token_authentication_is_joined_with_this_machines_token_and_said(token_head):
    done = joined(token_head)
    assert "token_auth=True" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "uses token authentication: verl joins it with RAY_AUTH_MODE=token" in done.stderr
    refused = joined(token_head, RAY_AUTH_MODE="disabled")
    assert "refused: the Ray cluster at" in refused.stdout and "RAY_AUTH_MODE=disabled here" in refused.stdout
    wrong = joined(token_head, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 32)
    assert "refused this machine's token" in wrong.stdout


def test_a_cluster_without_authentication_is_joined_as_it_is():
    with local_ray_cluster(nodes=1, gpus_per_node=1, token_auth=False) as address:
        done, with_token = joined(address, 1), joined(address, 1, RAY_AUTH_MODE="token")
    assert "nodes=1, gpus=1.0, token_auth=False" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "token authentication" not in done.stderr
    assert "gpus=1.0, token_auth=True" in with_token.stdout, "a token sent to a cluster without auth is harmless"


def test_a_cpu_cluster_without_gpu_slots_and_an_address_with_nothing_there_are_refused_naming_the_fix(token_head):
    short = joined(token_head, 2)
    assert "has 0 GPU slots on 1 node(s)" in short.stdout and "`ray start --head --num-gpus 2`" in short.stdout
    port = token_head.rsplit(":", 1)[1]
    nothing = f"127.0.0.1:{int(port) + 7}"
    with pytest.raises(AgentRLError, match=r"no Ray cluster answers there .* or unset RAY_ADDRESS"):
        join_cluster(nothing, "verl")


def prepared_config(ranks: int = 1, **ray_init: int):
    return OmegaConf.create({"trainer": {"nnodes": 1, "n_gpus_per_node": ranks},
                             "ray_kwargs": {"ray_init": {"num_cpus": None, **ray_init}}})


def test_the_clusters_resources_follow_ray_address_when_the_command_runs_not_when_it_was_prepared(
        monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for name in LEAN_LOCAL_RAY_ENV:  # unset now and again after the test: fit_cluster sets them
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    for_a_cluster = prepared_config(ranks=2)
    fit_cluster(for_a_cluster, set())
    assert OmegaConf.to_container(for_a_cluster.ray_kwargs.ray_init) == {"num_cpus": 16, "num_gpus": 2,
                                                                          "include_dashboard": False}
    assert {name: os.environ[name] for name in LEAN_LOCAL_RAY_ENV} == LEAN_LOCAL_RAY_ENV
    yours = prepared_config(ranks=2, include_dashboard=True)
    fit_cluster(yours, set())
    assert yours.ray_kwargs.ray_init.include_dashboard is True, "the dashboard you asked for stays"
    assert "verl starts its own Ray cluster, with 2 GPU slot(s)" in capsys.readouterr().err
    words = ["+ray_kwargs.ray_init.num_gpus=1", "ray_kwargs.ray_init.num_cpus=16"]
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    for_local = prepared_config(num_cpus=16, num_gpus=1)
    with pytest.raises(AgentRLError, match="no Ray cluster answers"):
        fit_cluster(for_local, set(typed_overrides(own_words(words, words))))  # the prepared command's
    assert OmegaConf.to_container(for_local.ray_kwargs.ray_init) == {"num_cpus": None, "num_gpus": None}
    assert "num_gpus and ray_kwargs.ray_init.num_cpus (for a cluster verl starts itself) are dropped" in \
        capsys.readouterr().err
    with pytest.raises(AgentRLError, match="ray_init.num_gpus, ray_kwargs.ray_init.num_cpus: the running Ray "
                                           "cluster at 127.0.0.1:1 brings its own resources"):
        fit_cluster(prepared_config(num_cpus=16, num_gpus=1), set(typed_overrides(own_words(words, []))))


def test_a_command_prepared_without_ray_address_joins_a_cluster_and_stops_before_ray_when_it_lacks_slots(
        tmp_path, model_dir, token_head):
    env = cpu_run_env(tmp_path)
    run_dir = tmp_path / "run"
    prepared = subprocess.run([sys.executable, "-m", "agentrl_plugins", "verl", "prepare", "deepswe_grpopp",
                               "--run-dir", str(run_dir), "--model", str(model_dir), "--cpu"],
                              env=env, capture_output=True, text=True, timeout=300)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "ray_kwargs.ray_init.num_cpus=16" in (run_dir / "main_ppo.sh").read_text()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(["sh", str(run_dir / "main_ppo.sh")], env={**env, "RAY_ADDRESS": token_head},
                          capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode != 0
    assert "num_cpus and num_gpus must not be provided" not in done.stderr
    assert "are dropped" in done.stderr and "joins it with RAY_AUTH_MODE=token" in done.stderr
    assert "`ray start --head --num-gpus 1`" in done.stderr, done.stderr[-3000:]
    assert "TaskRunner" not in done.stdout + done.stderr, "refused in the driver, before verl's TaskRunner"
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime < 60
