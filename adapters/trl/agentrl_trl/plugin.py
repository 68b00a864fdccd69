"""Registers the ``trl`` adapter."""

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Adapter


def _adapter():
    from agentrl_trl.adapter import TRLAdapter

    return TRLAdapter()


def _parity():
    from agentrl_trl.parity import compute

    return compute


@hookimpl
def agentrl_register_adapters(register):
    register(Adapter("trl", _adapter,
                     "TRL GRPOTrainer (1.10 to 1.16) with an episode-runner rollout_func (CPU or vLLM).",
                     parity=_parity))
