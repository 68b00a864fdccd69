"""The cpu platform and its workarounds: only with ``VERL_PLATFORM=cpu``, through verl's own registries and lookups."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentrl_verl.cpu import workarounds
from agentrl_verl.cpu.workarounds import VerlChangedError, VerlFixedWarning, attribute, still_present

PROBE = """
import json, os, verl
import torch
from agentrl_verl import verl_plugin
from verl.plugin.platform import get_platform
from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import get_rollout_replica_class
from verl.utils import distributed
out = {"workarounds": verl_plugin.CPU_WORKAROUNDS}
if os.environ.get("VERL_PLATFORM") == "cpu":
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    distributed.initialize_global_process_group_ray()
    x = torch.ones(3)
    torch.distributed.all_reduce(x)
    get_torch_device().empty_cache()
    out.update(device=get_device_name(), backend=get_nccl_backend(), resource=get_platform().ray_resource_name(),
               moved=str(torch.zeros(1).to(get_platform().current_device()).device),
               engine=EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
               replica=get_rollout_replica_class("agentrl_hf").__name__,
               adapter=get_rollout_class("agentrl_hf", "async").__name__,
               reduced=x.tolist(), pg_backend=torch.distributed.get_backend())
    import importlib.metadata
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer
    out.update(vllm=importlib.metadata.version("vllm"), extension=vLLMHttpServer._get_worker_extension_cls(None))
import inspect
from transformers import AttentionInterface
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils import torch_functional
out["poll_s"] = inspect.signature(ReplayBuffer.__init__).parameters["poll_interval"].default
out["packed_attention"] = "agentrl_packed_sdpa" in AttentionInterface()
logits = torch.randn(2, 517, 300, generator=torch.Generator().manual_seed(0), requires_grad=True)
labels = torch.randint(0, 300, (2, 517), generator=torch.Generator().manual_seed(1))
found = torch_functional.logprobs_from_logits(logits, labels)
found.sum().backward()
grad, logits.grad = logits.grad, None
expected = torch.log_softmax(logits, -1).gather(-1, labels[..., None])[..., 0]
expected.sum().backward()
out["log_prob_gap"] = max((found - expected).abs().max().item(), (grad - logits.grad).abs().max().item())
print(json.dumps(out))
"""


def probe(platform: str | None) -> dict:
    env = {**{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}, "OMP_NUM_THREADS": "1"}
    if platform:
        env["VERL_PLATFORM"] = platform
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_with_verl_platform_cpu_verls_own_lookups_find_the_cpu_parts_and_gloo_works():
    out = probe("cpu")
    assert out["workarounds"] == {name.__name__: True for name in workarounds.WORKAROUNDS}
    assert (out["device"], out["backend"], out["resource"], out["moved"]) == ("cpu", "gloo", "GPU", "cpu")
    assert out["engine"] == "FSDPEngineWithLMHead"
    assert (out["replica"], out["adapter"]) == ("HFReplica", "HFServerAdapter")
    assert out["vllm"].endswith("+cpu"), "verl finds vLLM's CPU build under the name vllm"
    assert out["extension"] == "agentrl_verl.cpu.vllm_worker.CpuWorkerExtension", "the CPU build's weight sync"
    assert out["reduced"] == [1.0, 1.0, 1.0] and out["pg_backend"] == "cpu:gloo"
    assert out["poll_s"] == workarounds.REPLAY_POLL_S
    assert out["packed_attention"], "transformers knows the packed-sequence attention the CPU profile names"
    assert out["log_prob_gap"] < 1e-5, "verl's log-probs (values and gradient) as a log-softmax gives them"


def test_without_it_nothing_is_registered_or_patched():
    out = probe(None)
    assert out["workarounds"] == {} and out["poll_s"] == 2.0 and not out["packed_attention"]
    assert out["log_prob_gap"] < 1e-5


def test_a_fixed_behaviour_warns_and_a_moved_target_is_an_error():
    assert still_present("t", "verl.utils.distributed", "cpu:gloo,")
    with pytest.warns(VerlFixedWarning, match="no longer contains"):
        assert not still_present("t", "verl.utils.distributed", "a marker verl does not have")
    with pytest.raises(VerlChangedError, match="initialize_global_process_group_gone"):
        attribute("verl.utils.distributed", "initialize_global_process_group_gone")
    with pytest.raises(VerlChangedError, match="is gone from this verl"):
        still_present("t", "verl.utils.no_such_module", "x")
