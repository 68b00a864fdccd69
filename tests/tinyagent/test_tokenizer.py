"""The TinyAgent tokenizer: exact round-trips of every gym text, one-token newlines, a chat template the runner can
use."""

from __future__ import annotations

import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from agentrl_plugins.chat import ChatCodec, template_ids

from agentrl_tinyagent import build_model
from agentrl_tinyagent.tokenizer import vocabulary
from bugfix_gym.env import SYSTEM_PROMPT, task_prompt
from bugfix_gym.families import FAMILIES
from bugfix_gym.grammar import MALFORMED_MESSAGE, format_call


def gym_texts(gym) -> list[str]:
    """The system prompt, every family's prompt and sources, and every observation the tools give."""
    texts = [SYSTEM_PROMPT, MALFORMED_MESSAGE]
    for family in FAMILIES:
        texts += [task_prompt(family), family.issue, family.buggy, family.fixed]
        task = next(t for t in gym.tasks() if t.family == family.name)
        for op in (None,) + family.op_names:
            session = gym.start(task)
            if op is not None:
                texts.append(session.step(format_call("edit", op)).observation)
            texts += [session.step(format_call(tool)).observation for tool in ("read", "test")]
            texts += [session.step("<tool>edit no_such_op</tool>").observation, session.step("hello").observation]
            texts += [session.step(format_call("submit")).observation, session.step(format_call("read")).observation]
    return texts


@pytest.fixture(scope="module")
def reloaded(tokenizer, tmp_path_factory):
    """The tokenizer saved next to a Qwen2 model and loaded back with ``AutoTokenizer`` (as trainers do)."""
    path = tmp_path_factory.mktemp("tinyagent-tokenizer")
    build_model(tokenizer, seed=0).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def test_every_gym_text_round_trips_and_reloads_identically(tokenizer, reloaded, gym):
    texts = gym_texts(gym)
    assert any(text.startswith("FAIL ") for text in texts) and any("\nPASS " in text for text in texts)
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        assert reloaded.encode(text, add_special_tokens=False) == ids
        assert reloaded.decode(ids) == text


def test_any_string_round_trips_through_byte_fallback(tokenizer):
    text = "tabs\tand\r\nbytes \x00\x7f, accents é, arrows → and emoji 😀"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_newline_is_one_token_and_vocab_is_small(tokenizer, reloaded):
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1
    assert len(reloaded.encode("\n", add_special_tokens=False)) == 1
    assert len(tokenizer) == len(reloaded) < 300


def test_tool_calls_are_a_few_tokens(tokenizer):
    for family in FAMILIES:
        for op in family.op_names:
            assert len(tokenizer.encode(format_call("edit", op), add_special_tokens=False)) == 4
    assert len(tokenizer.encode(format_call("submit"), add_special_tokens=False)) == 3


def test_chat_template_works_with_the_chat_codec(tokenizer, reloaded):
    for tok in (tokenizer, reloaded):
        codec = ChatCodec(tok, SYSTEM_PROMPT)
        assert codec.turn_closing == [tok.eos_token_id]
        prompt = codec.prompt_ids(task_prompt(FAMILIES[0]))
        reply = tok.encode(format_call("read"), add_special_tokens=False) + [tok.eos_token_id]
        observation = codec.observation_ids(FAMILIES[0].buggy, turn_ended_with_eos=True)
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": task_prompt(FAMILIES[0])},
                    {"role": "assistant", "content": format_call("read")},
                    {"role": "user", "content": FAMILIES[0].buggy}]
        assert prompt + reply + observation == template_ids(tok, messages, add_generation_prompt=True)
        assert tok.decode(prompt + reply, skip_special_tokens=True).endswith(format_call("read"))


def test_the_vocabulary_without_transformers_is_the_tokenizers(tokenizer, reloaded):
    """The cache key hashes :func:`vocabulary` (no transformers): it must be the vocabulary the model is built
    with, or a changed tokenizer would not rebuild the warm start."""
    assert vocabulary() == tokenizer.get_vocab() == reloaded.get_vocab()


def test_core_package_does_not_import_transformers():
    code = "import sys, agentrl_plugins, agentrl_plugins.episode; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
