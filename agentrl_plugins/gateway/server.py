"""The gateway: an OpenAI-compatible HTTP server (Starlette on uvicorn) in front of a rollout sampler.

Each episode is a session, named by a key carried in the URL (``/sessions/KEY/v1/...``), the ``X-Agentrl-Session``
header or the API key; its calls are served by the session's ``generate`` on the session's event loop (the
trainer's) and recorded token by token. A reply or refusal that ends the episode carries the header
``X-Agentrl-Episode-End: REASON``.

No request can hold it up: a body over ``max_request_bytes`` is refused (413) before it is read, a prompt too long
for the context before it is rendered (:mod:`~agentrl_plugins.gateway.token_bound`), rendering and tokenizing run
off the event loop, sessions it opened itself expire when idle, and stopping it waits ``SHUTDOWN_GRACE_S`` at most
for open connections. Every refusal, a malformed request or an unknown route included, has OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Any, Callable

from agentrl_plugins.chat import ChatCodec
from agentrl_plugins.episode import Generate
from agentrl_plugins.gateway.keys import new_key, presented_key
from agentrl_plugins.gateway.openai_api import (
    ApiError,
    completion_body,
    logprobs_body,
    models_body,
    parse_chat_request,
    stream_events,
)
from agentrl_plugins.gateway.recorder import EpisodeRecorder
from agentrl_plugins.gateway.session import EpisodeOver, GatewaySession, SessionBusy
from agentrl_plugins.gateway.tool_calls import renders_tools
from agentrl_plugins.types import Limits, Sampling

EPISODE_END_HEADER = "x-agentrl-episode-end"
ENDED_KEPT = 100_000
MAX_REQUEST_BYTES = 4 * 2**20
"""The largest request body served (OpenAI's own API takes a few MiB of text per call at most)."""
SHUTDOWN_GRACE_S = 2.0
"""How long stopping waits for open connections (a client that never finishes its request included)."""
SessionFactory = Callable[[str, asyncio.AbstractEventLoop], GatewaySession]


class Gateway:
    """Serves ``/v1/chat/completions`` and ``/v1/models`` for the sessions it holds; ``start()`` runs it on a thread
    of its own (``port=0`` picks a free port), ``stop()`` ends it. ``session_factory``, when given, opens a session
    for a key it has not seen (the standalone ``agentrl gateway``); otherwise an unknown key is a 404. Sessions the
    factory opened end as ``expired`` after ``session_idle_s`` without a call (``on_expire`` gets each), and at most
    ``max_sessions`` of them are open at once (a new key beyond that is a 429)."""

    def __init__(self, model_name: str = "agentrl", host: str = "127.0.0.1", port: int = 0,
                 session_factory: SessionFactory | None = None, *, max_request_bytes: int = MAX_REQUEST_BYTES,
                 session_idle_s: float | None = None, max_sessions: int | None = None,
                 on_expire: Callable[[GatewaySession], None] | None = None):
        self.model_name = model_name
        self.host = host
        self.port = port
        self.session_factory = session_factory
        self.max_request_bytes = max_request_bytes
        self.session_idle_s = session_idle_s
        self.max_sessions = max_sessions
        self.on_expire = on_expire
        self.sessions: dict[str, GatewaySession] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()
        """Keys of the last ``ENDED_KEPT`` sessions closed by their owner, with their termination: a late call gets
        a clear refusal."""
        self._last_call: OrderedDict[str, float] = OrderedDict()
        """When each session the factory opened was last called, least recent first."""
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.app = self._build_app()

    # Sessions -----------------------------------------------------------------------------------------------

    def open_session(self, generate: Generate, tokenizer: Any, limits: Limits, sampling: Sampling, *,
                     loop: asyncio.AbstractEventLoop | None = None, key: str | None = None,
                     codec: ChatCodec | None = None) -> GatewaySession:
        """A new episode whose calls ``generate`` serves on ``loop`` (the running loop by default)."""
        key = key or new_key()
        if key in self.sessions:
            raise ValueError(f"session {key!r} is already open")
        session = GatewaySession(key, generate, loop or asyncio.get_running_loop(), tokenizer, limits, sampling,
                                 EpisodeRecorder(tokenizer, codec))
        self.sessions[key] = session
        return session

    def close_session(self, key: str) -> GatewaySession:
        """Remove the session ``key`` (its later calls are refused) and return it."""
        session = self.sessions.pop(key)
        session.end("closed")
        self._remember_ended(key, session.termination or "closed")
        return session

    def _remember_ended(self, key: str, termination: str) -> None:
        self._last_call.pop(key, None)
        self.ended[key] = termination
        while len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)

    def expire_idle(self, now: float | None = None) -> list[GatewaySession]:
        """End (as ``expired``) and remove the factory's sessions idle for ``session_idle_s``; returns them."""
        if self.session_idle_s is None:
            return []
        now = time.monotonic() if now is None else now
        expired = []
        for key, last in list(self._last_call.items()):
            if now - last < self.session_idle_s:
                break
            session = self.sessions[key]
            if session.in_flight:  # a long call is not idleness
                continue
            del self.sessions[key]
            session.end("expired")
            self._remember_ended(key, "expired")
            expired.append(session)
            if self.on_expire is not None:
                self.on_expire(session)
        return expired

    # Lifecycle ----------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://host:port/v1``) once started."""
        if self._server is None:
            raise RuntimeError("the gateway is not started")
        return f"http://{self.host}:{self.port}/v1"

    def session_url(self, key: str) -> str:
        """The base URL whose calls belong to the session ``key``."""
        return self.base_url.removesuffix("/v1") + f"/sessions/{key}/v1"

    def start(self, timeout_s: float = 30.0) -> Gateway:
        """Serve on a daemon thread; returns once the socket listens."""
        import uvicorn

        if self._server is not None:
            return self
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning", access_log=False,
                                lifespan="off", timeout_keep_alive=30,
                                timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S))
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="agentrl-gateway", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        self._server, self._thread = server, thread
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving (open connections are closed, after ``SHUTDOWN_GRACE_S`` at most); a second call does
        nothing."""
        if self._server is None:
            return
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(timeout_s)
        self._server = self._thread = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # HTTP ---------------------------------------------------------------------------------------------------

    def _build_app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route

        routes = []
        for prefix in ("", "/sessions/{key}"):
            routes += [Route(f"{prefix}/v1/models", self._models, methods=["GET"]),
                       Route(f"{prefix}/v1/chat/completions", self._chat, methods=["POST"])]
        routes.append(Route("/agentrl/sessions/{key}", self._record, methods=["GET"]))
        return Starlette(routes=routes, exception_handlers={ApiError: _api_error, HTTPException: _http_error,
                                                            Exception: _server_error})

    def _session_for(self, request: Any) -> GatewaySession:
        key = presented_key(request, lambda named: named in self.sessions or named in self.ended)
        if not key:
            raise ApiError(401, "no session: put the episode's key in the API key, the X-Agentrl-Session header "
                                "or the URL (/sessions/KEY/v1)", kind="authentication_error", code="no_session")
        if key in self.ended:
            raise ApiError(409, f"session {key!r} has ended ({self.ended[key]})", code="episode_ended",
                           headers={EPISODE_END_HEADER: self.ended[key]})
        if key not in self.sessions:
            if self.session_factory is None:
                raise ApiError(404, f"unknown session {key!r}", code="session_not_found")
            if self.max_sessions is not None and len(self._last_call) >= self.max_sessions:
                raise ApiError(429, f"this gateway holds its {self.max_sessions} sessions; one must end or expire "
                                    "first", kind="rate_limit_error", code="too_many_sessions")
            self.sessions[key] = self.session_factory(key, asyncio.get_running_loop())
            self._last_call[key] = time.monotonic()
        elif key in self._last_call:
            self._last_call[key] = time.monotonic()
            self._last_call.move_to_end(key)
        return self.sessions[key]

    async def _body(self, request: Any) -> bytes:
        """The request's body, refused (413) past ``max_request_bytes``: by its Content-Length before a byte is
        read, else as soon as the bytes streamed in pass it."""
        limit = self.max_request_bytes
        too_large = ApiError(413, f"the request body is over this gateway's {limit} bytes", code="request_too_large")
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise ApiError(400, f"Content-Length {declared!r} is not a byte count")
            if int(declared) > limit:
                raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def _models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(models_body([self.model_name]))

    async def _chat(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        self.expire_idle()
        chat = parse_chat_request(await self._body(request))
        if chat.model != self.model_name:
            raise ApiError(404, f"model {chat.model!r} does not exist; this gateway serves {self.model_name!r}",
                           param="model", code="model_not_found")
        session = self._session_for(request)
        if chat.tools and session.renders_tools is None:
            session.renders_tools = renders_tools(session.tokenizer)
        if chat.tools and not session.renders_tools:
            raise ApiError(400, "this model's chat template does not show tools to the model: describe them in the "
                                "prompt, or serve a model whose template renders tools", param="tools",
                           code="unsupported")
        if chat.sampling and any(getattr(session.sampling, name) != value for name, value in chat.sampling.items()):
            session.sampling_overridden += 1
        try:
            reply = await session.complete(chat.messages, chat.max_tokens, chat.tools, chat.parse_tools)
        except SessionBusy as error:
            raise ApiError(409, str(error), code="session_busy") from None
        except EpisodeOver as error:
            code = "context_length_exceeded" if error.termination == "max_context" else "episode_ended"
            raise ApiError(400 if code == "context_length_exceeded" else 409, str(error), code=code,
                           headers={EPISODE_END_HEADER: error.termination}) from None
        generation = reply.generation
        logprobs = (logprobs_body(session.tokenizer, generation.token_ids, generation.logprobs)
                    if chat.logprobs else None)
        body = completion_body(self.model_name, reply.message, generation.finish_reason, reply.prompt_tokens,
                               len(generation.token_ids), logprobs)
        headers = {EPISODE_END_HEADER: reply.ended} if reply.ended else {}
        if chat.stream:
            return StreamingResponse(iter(stream_events(body)), media_type="text/event-stream", headers=headers)
        return JSONResponse(body, headers=headers)

    async def _record(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        key = request.path_params["key"]
        if key not in self.sessions:
            raise ApiError(404, f"unknown session {key!r}", code="session_not_found")
        return JSONResponse(session_record(self.sessions[key]))


def session_record(session: GatewaySession) -> dict[str, Any]:
    """A session as JSON: its termination, replies, drift, calls with other sampling settings, and segments."""
    recorder = session.recorder
    return {"key": session.key, "termination": session.termination, "turns": recorder.turns, "drift": recorder.drift,
            "sampling_overridden": session.sampling_overridden,
            "segments": [asdict(segment) for segment in recorder.segments]}


async def _api_error(request: Any, error: Exception) -> Any:
    from starlette.responses import JSONResponse

    assert isinstance(error, ApiError)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _http_error(request: Any, error: Exception) -> Any:
    """Starlette's own refusals (no such route, a method the route does not take) in OpenAI's shape."""
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse

    assert isinstance(error, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code)
    message = (f"no route {request.method} {request.url.path} (this gateway serves /v1/chat/completions and "
               "/v1/models)" if error.status_code in (404, 405) else str(error.detail))
    return JSONResponse(ApiError(error.status_code, message, code=code).body(), status_code=error.status_code,
                        headers=error.headers)


async def _server_error(request: Any, error: Exception) -> Any:
    """A failure of the gateway itself: OpenAI's 500 body (the traceback goes to the gateway's log)."""
    from starlette.responses import JSONResponse

    return JSONResponse(ApiError(500, f"the gateway failed serving this request: {error!r}", kind="server_error",
                                 code="server_error").body(), status_code=500)
