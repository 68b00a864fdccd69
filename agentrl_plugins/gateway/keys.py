"""Episode keys: each unguessable, each naming one session; a request that names two is refused."""

from __future__ import annotations

import secrets
from typing import Any, Callable

from agentrl_plugins.gateway.openai_api import ApiError

SESSION_HEADER = "x-agentrl-session"


def new_key() -> str:
    """A fresh episode key: 256 random bits (``secrets.token_urlsafe``), known only to the episode's program."""
    return f"ep-{secrets.token_urlsafe(32)}"


def presented_key(request: Any, is_session: Callable[[str], bool]) -> str:
    """The session key a request names: in its URL (``/sessions/KEY/v1``), else its ``X-Agentrl-Session`` header,
    else its API key (``Authorization: Bearer KEY``); "" when none. Where the key is named, the other places may
    hold anything (a harness's placeholder API key) but another session's key (``is_session``): such a request is
    refused (403), so an episode's URL takes no other episode's key."""
    authorization = request.headers.get("authorization", "")
    bearer = authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else ""
    named = [key for key in (request.path_params.get("key"), request.headers.get(SESSION_HEADER), bearer) if key]
    if not named:
        return ""
    if any(other != named[0] and is_session(other) for other in named[1:]):
        raise ApiError(403, "the request names two sessions (its URL, X-Agentrl-Session header and API key): an "
                            "episode's key works for that episode alone", kind="authentication_error",
                       code="session_mismatch")
    return named[0]
