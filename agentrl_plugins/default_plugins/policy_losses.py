"""Registers the built-in policy losses."""

from agentrl_plugins.algorithms import policy_loss
from agentrl_plugins.components import PolicyLoss
from agentrl_plugins.hookspecs import hookimpl


@hookimpl
def agentrl_register_policy_losses(register):
    register(PolicyLoss("ppo_clip", policy_loss.ppo_clip,
                        "PPO's clipped token surrogate, clip-higher and dual clip as the recipe sets them."))
    register(PolicyLoss("gspo", policy_loss.gspo,
                        "GSPO: the clipped surrogate on the length-normalised sequence ratio (token variant)."))
    register(PolicyLoss("cispo", policy_loss.cispo,
                        "CISPO: the importance weight capped at 1 + clip_high under stop-gradient, times A log pi."))
