"""Registers the built-in sampler/learner mismatch corrections."""

from agentrl_plugins.algorithms import corrections
from agentrl_plugins.components import Correction
from agentrl_plugins.hookspecs import hookimpl


@hookimpl
def agentrl_register_corrections(register):
    register(Correction("none", corrections.none, "No correction: every policy token has weight 1."))
    register(Correction("token_tis", corrections.token_tis,
                        "Token-level truncated importance sampling, weights capped at C."))
    register(Correction("sequence_tis", corrections.sequence_tis,
                        "Sequence-level truncated importance sampling, capped at C."))
    register(Correction("icepop", corrections.icepop, "IcePop: zero tokens whose ratio leaves the band [low, high]."))
    register(Correction("geometric_sequence_mask", corrections.geometric_sequence_mask,
                        "Mask whole sequences whose geometric-mean ratio leaves [low, high]."))
