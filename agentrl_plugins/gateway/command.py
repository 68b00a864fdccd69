"""``agentrl gateway``: serve a model over the OpenAI Chat Completions API on a chosen port, recording every
session's tokens; what an agent program can be pointed at by hand."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from pathlib import Path
from typing import Any, Optional

import typer

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.gateway.server import MAX_REQUEST_BYTES, session_record
from agentrl_plugins.gateway.session import GatewaySession
from agentrl_plugins.types import Limits, Sampling


def load_sampler(model: str, seed: int) -> tuple[Any, Any]:
    """The batched HF sampler over ``model`` (a registered model or a local folder) and its tokenizer."""
    from agentrl_plugins.models import resolve_model

    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentrl_plugins.hf_sampler import HFGenerator
    except ImportError as error:
        raise AgentRLError(f"agentrl gateway needs transformers ({error.name} is missing): "
                           "pip install 'agentrl-plugins[hf,gateway]'") from None
    folder = resolve_model(model, seed=seed, prepare=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    policy = AutoModelForCausalLM.from_pretrained(folder).eval()
    eos = tokenizer.eos_token_id
    return HFGenerator(policy, eos, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
                       seed=seed), tokenizer


class SessionLog:
    """The ``--record`` file: one JSON line per session, written as the session leaves the gateway."""

    def __init__(self, path: Path | None):
        self.path = path
        self.written = 0
        self._out = path.open("w") if path is not None else None

    def write(self, session: GatewaySession) -> None:
        if self._out is not None:
            self._out.write(json.dumps(session_record(session)) + "\n")
            self._out.flush()
            self.written += 1

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            typer.echo(f"recorded {self.written} sessions in {self.path}", err=True)


def gateway_command(
    model: str = typer.Option("tinyagent", help="A registered model or a local Hugging Face folder."),
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8000, help="The port (0 picks a free one)."),
    seed: int = typer.Option(0, help="The sampler's seed."),
    temperature: float = typer.Option(1.0, help="Sampling temperature of every call."),
    max_turns: int = typer.Option(64, help="Replies per session before it ends as max_turns."),
    max_context_tokens: int = typer.Option(4096, help="Tokens per session segment before it ends as max_context."),
    max_new_tokens: int = typer.Option(256, help="Tokens per reply at most."),
    record: Optional[Path] = typer.Option(None, help="Write each session's tokens here (JSON lines): a session as "
                                                     "it expires, the open ones on exit."),
    session_idle_s: float = typer.Option(600.0, help="Seconds without a call after which a session expires."),
    max_sessions: int = typer.Option(4096, help="Sessions open at once at most (a new key beyond is a 429)."),
    max_request_bytes: int = typer.Option(MAX_REQUEST_BYTES, help="The largest request body served (413 past it)."),
) -> None:
    """Serve a model over the OpenAI Chat Completions API; each API key is a session whose tokens are recorded.
    Ctrl-C or SIGTERM stops it within seconds."""
    from agentrl_plugins.gateway.recorder import EpisodeRecorder
    from agentrl_plugins.gateway.server import Gateway
    from agentrl_plugins.gateway.session import GatewaySession

    generate, tokenizer = load_sampler(model, seed)
    limits = Limits(max_turns, max_context_tokens, max_new_tokens, timeout_s=float("inf"))
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens)

    def new_session(key: str, loop: asyncio.AbstractEventLoop) -> GatewaySession:
        return GatewaySession(key, generate, loop, tokenizer, limits, sampling, EpisodeRecorder(tokenizer))

    log = SessionLog(record)
    gateway = Gateway(model_name=Path(model).name, host=host, port=port, session_factory=new_session,
                      max_request_bytes=max_request_bytes, session_idle_s=session_idle_s, max_sessions=max_sessions,
                      on_expire=log.write).start()
    typer.echo(f"serving {model!r} at {gateway.base_url} (model name {gateway.model_name!r}); Ctrl-C stops",
               err=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        gateway.stop()
        for session in list(gateway.sessions.values()):
            log.write(session)
        log.close()
