"""Joining the Ray cluster at ``RAY_ADDRESS`` from a framework's driver, before the framework connects to it.

Three things stop a user's own cluster that Ray only reports after the framework has started (or never):
nothing listening at the address; Ray's token authentication, which ``ray start --head`` turns on wherever a
token exists (``~/.ray/auth_token``, written by any local Ray run) while a driver given an explicit address never
sends one unless ``RAY_AUTH_MODE=token`` is set; and a CPU cluster without the ``GPU`` slots the CPU backends place
their ranks by (started without ``--num-gpus``: verl stops after its TaskRunner started, OpenRLHF waits forever).
:func:`join_cluster` asks the cluster's GCS directly (milliseconds), joins with this machine's token where the
cluster wants one (and says so), and raises an :class:`~agentrl_plugins.errors.AgentRLError` naming the fix
otherwise.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass

from agentrl_plugins.errors import AgentRLError

AUTH_MODE_ENV = "RAY_AUTH_MODE"
CONNECT_TIMEOUT_S = 5.0
GCS_TIMEOUT_S = 10
TOKEN_HELP = ("the cluster's token in RAY_AUTH_TOKEN, a file named by RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token "
              "(`ray get-auth-token` on the head node prints it)")


@dataclass(frozen=True)
class ClusterResources:
    """What a running cluster offers, from its GCS: its nodes and their total ``GPU`` slots."""

    address: str
    nodes: int
    gpus: float
    token_auth: bool


def gcs_address(address: str) -> tuple[str, int] | None:
    """``host`` and ``port`` of a ``HOST:PORT`` address; None for the forms Ray resolves itself (``auto``,
    ``local``, ``ray://`` clients, job-server URLs)."""
    if "://" in address or address in ("auto", "local"):
        return None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise AgentRLError(f"RAY_ADDRESS={address!r} is not HOST:PORT (as `ray start --head` prints it)")
    return host, int(port)


def _listening(host: str, port: int) -> OSError | None:
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        return error
    return None


def _nodes(address: str) -> list[dict[str, float]]:
    from ray._raylet import GcsClient

    info = GcsClient(address=address).get_all_node_info(timeout=GCS_TIMEOUT_S)
    return [dict(node.resources_total) for node in info.values() if getattr(node, "state", 0) == 0]


def _use_token() -> bool:
    """Turn on Ray's token authentication in this process (and the processes it starts), as Ray itself does for a
    cluster it finds without an address; whether a token is there to send."""
    from ray._raylet import AuthenticationTokenLoader, Config

    loader = AuthenticationTokenLoader.instance()
    if not loader.has_token(ignore_auth_mode=True):
        return False
    os.environ[AUTH_MODE_ENV] = "token"
    Config.initialize("")
    loader.reset_cache()
    return True


def join_cluster(address: str, who: str, gpu_slots: int = 0, slot_users: str = "") -> ClusterResources | None:
    """Check the cluster at ``address`` before ``who`` (a framework's name) connects: it answers, this process can
    authenticate (turning on token authentication here when the cluster wants it and a token is available, said on
    stderr), and, with ``gpu_slots`` (one for each of ``slot_users``, the CPU backend's processes), its nodes have
    that many ``GPU`` slots together. None for an address Ray resolves itself; raises naming what to do
    otherwise."""
    parsed = gcs_address(address)
    if parsed is None:
        return None
    refused = _listening(*parsed)
    if refused is not None:
        raise AgentRLError(f"RAY_ADDRESS={address}: no Ray cluster answers there ({refused}). Start one "
                           f"(`ray start --head --port {parsed[1]}`), or unset RAY_ADDRESS and {who} starts its own")
    from ray.exceptions import AuthenticationError

    mode = os.environ.get(AUTH_MODE_ENV)
    try:
        nodes, token_auth = _nodes(address), mode == "token"
    except AuthenticationError:
        if mode == "token":
            raise AgentRLError(f"the Ray cluster at {address} refused this machine's token: give {who} "
                               f"{TOKEN_HELP}") from None
        if mode is not None:
            raise AgentRLError(f"the Ray cluster at {address} uses Ray's token authentication and "
                               f"{AUTH_MODE_ENV}={mode} here: unset it, or set {AUTH_MODE_ENV}=token with "
                               f"{TOKEN_HELP}") from None
        if not _use_token():
            raise AgentRLError(f"the Ray cluster at {address} uses Ray's token authentication and this machine "
                               f"has no token: set {AUTH_MODE_ENV}=token with {TOKEN_HELP}") from None
        try:
            nodes, token_auth = _nodes(address), True
        except AuthenticationError:
            raise AgentRLError(f"the Ray cluster at {address} refused this machine's token "
                               f"(~/.ray/auth_token): give {who} {TOKEN_HELP}") from None
        print(f"agentrl: the Ray cluster at {address} uses token authentication: {who} joins it with "
              f"{AUTH_MODE_ENV}=token and this machine's token (Ray sends one by itself only to a cluster it finds "
              "without RAY_ADDRESS)", file=sys.stderr, flush=True)
    gpus = sum(node.get("GPU", 0.0) for node in nodes)
    if gpu_slots > gpus:
        raise AgentRLError(
            f"the Ray cluster at {address} has {gpus:g} GPU slots on {len(nodes)} node(s), and {who}'s CPU backend "
            f"places {slot_users or f'{gpu_slots} processes'} on one each (a label for a CPU process, not a "
            f"device): start the head with `ray start --head --num-gpus {gpu_slots}` (with several nodes, each "
            f"node's `ray start` with --num-gpus for the ranks it hosts)")
    return ClusterResources(address, len(nodes), gpus, token_auth)
