"""Files OpenRLHF loads by path: ``--train.agent_func_path`` and ``--reward.remote_url``.

Each is a thin file that imports its object from this package; ``agentrl openrlhf paths``
prints where they are installed.
"""

from pathlib import Path

AGENT_EXECUTOR = Path(__file__).with_name("agent_executor.py")
REWARD_FUNC = Path(__file__).with_name("reward_func.py")
