"""The names this adapter registers in verl (prefixed, so nothing of verl's is shadowed) and shared constants."""

PREFIX = "agentrl_"
SETTINGS_KEY = "agentrl"
"""The top-level Hydra key under which ``+agentrl.recipe`` names the run folder's recipe file."""
ON_POLICY_KEY = f"{SETTINGS_KEY}.on_policy_update"
"""``+agentrl.on_policy_update=true``: the update scores the old policy in its own forward
(:mod:`agentrl_verl.verl_plugin.on_policy`)."""


def estimator_name(estimator: str) -> str:
    """verl ``algorithm.adv_estimator`` name of a core advantage estimator."""
    return PREFIX + estimator


def policy_loss_name(correction: str) -> str:
    """verl ``actor.policy_loss.loss_mode`` name that applies a core correction inside the loss."""
    return PREFIX + correction


def agent_loop_name(environment: str) -> str:
    """verl agent loop name (the dataset's ``agent_name``) of an agentrl environment."""
    return PREFIX + environment

SEQUENCE_MEAN_MODES = ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""verl loss aggregations whose trainer denominator is the mini-batch's row count."""
ROLLOUT_NAME = PREFIX + "hf"
"""The CPU rollout backend's name (``actor_rollout_ref.rollout.name``): :mod:`agentrl_verl.cpu.rollout`."""
RAW_RATIO_THRESHOLD = 1e9
"""A token-IS threshold above exp(20), the largest ratio verl computes: verl then truncates nothing."""
