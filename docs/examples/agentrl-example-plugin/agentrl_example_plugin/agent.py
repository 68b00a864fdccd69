"""The arithmetic tasks played by an agent program: your own loop over the ``openai`` client, trained through the
gateway. It keeps its conversation, asks the model, runs the calculator the model asked for, and returns the
answer for the verifier; when the gateway ends the episode (a limit), it returns what it has."""

from __future__ import annotations

import functools
from typing import Any

from agentrl_plugins.environment import AgentLink

from agentrl_example_plugin.environment import Answer, ArithmeticEnv


@functools.lru_cache(maxsize=8)
def client_for(base_url: str) -> Any:
    """One client per gateway (a new ``openai.OpenAI`` builds an SSL context: keep it)."""
    import openai

    return openai.OpenAI(base_url=base_url, api_key="per-episode", max_retries=0)


class ArithmeticAgent(ArithmeticEnv):
    """The arithmetic suite whose episodes :meth:`run_agent` plays (an agent-program environment)."""

    def run_agent(self, link: AgentLink) -> Answer:
        import openai

        client = client_for(link.base_url).with_options(api_key=link.api_key, timeout=link.timeout_s)
        session = self.start(link.task)
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": session.prompt}]
        while True:
            try:
                reply = client.chat.completions.create(model=link.model, messages=messages)
            except openai.APIStatusError:  # the gateway ended the episode: out of turns, context or time
                return session.outcome()
            text = reply.choices[0].message.content or ""
            result = session.step(text)
            if result.done:
                return session.outcome()
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": result.observation}]
