"""An OpenAI-compatible gateway that turns agent programs into token-exact trajectories (the ``gateway`` extra:
Starlette and uvicorn)."""

from agentrl_plugins.gateway.keys import SESSION_HEADER
from agentrl_plugins.gateway.program import play_agent_program
from agentrl_plugins.gateway.recorder import EpisodeRecorder, Segment
from agentrl_plugins.gateway.server import EPISODE_END_HEADER, Gateway
from agentrl_plugins.gateway.session import EpisodeOver, GatewaySession

__all__ = ["EPISODE_END_HEADER", "SESSION_HEADER", "EpisodeOver", "EpisodeRecorder", "Gateway", "GatewaySession",
           "Segment", "play_agent_program"]
