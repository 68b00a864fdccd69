"""Hugging Face models and tokenizers built locally, with no hub: a byte-level chat tokenizer and a seeded Qwen2.

Needs the ``hf`` extra (transformers), imported on use: the tokenizer's layout (:func:`byte_chat_backend`, its
vocabulary) and :class:`ModelSize` cost only ``tokenizers``, so a cache key can be computed without transformers
or torch. The tokenizer is a byte-level BPE without merges,
laid out exactly as ``Qwen2Tokenizer`` builds one (NFC, Qwen's split regex, byte-level
pre-tokenizer and decoder), so ``AutoTokenizer`` (which always loads a Qwen2 checkpoint's
tokenizer as ``Qwen2Tokenizer``) and ``PreTrainedTokenizerFast`` give the same ids. Every ASCII
character (``"\\n"`` included) is one token, any other character is its UTF-8 bytes, so every NFC
string round-trips; ``words`` become single tokens on top.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast, Qwen2ForCausalLM

PAD, EOS, UNK = "<|pad|>", "<|end|>", "<|unk|>"
ROLES = ("system", "user", "assistant", "tool")
ROLE_TOKENS = tuple(f"<|{role}|>" for role in ROLES)
SPECIALS = (PAD, EOS, UNK) + ROLE_TOKENS
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
              r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


TOOLS_CHAT_TEMPLATE = (
    "{% if tools %}{{ '<|system|>Tools: ' + (tools | tojson) + '<|end|>' }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + (message['content'] or '') }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{{ '<tool_call>' + ({'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson)"
    " + '</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
""":data:`CHAT_TEMPLATE` with OpenAI-style tools: their JSON in a system block first, an assistant's tool calls in
the Hermes form (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``) after its content. Without tools or
tool calls it renders exactly as :data:`CHAT_TEMPLATE`."""


def byte_symbols() -> list[str]:
    """The 256 byte-level symbols in byte order (GPT-2's ``bytes_to_unicode``)."""
    printable = {*range(33, 127), *range(161, 173), *range(174, 256)}
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def byte_chat_backend(words: Sequence[str] = ()) -> Tokenizer:
    """The byte-level tokenizer with ``words`` as single tokens, as ``tokenizers`` holds it (deterministic: same
    ids on every call); :func:`byte_chat_tokenizer` wraps it for transformers."""
    vocab = {token: index for index, token in enumerate(list(SPECIALS) + byte_symbols())}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], dropout=None, unk_token=None,
                                   continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
                                   byte_fallback=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIALS])
    backend.add_tokens([AddedToken(word, special=False, normalized=False) for word in words])
    return backend


def byte_chat_tokenizer(words: Sequence[str] = (), tools: bool = False) -> PreTrainedTokenizerFast:
    """The byte-level chat tokenizer with ``words`` as single tokens (deterministic: same ids on every call);
    ``tools`` gives it :data:`TOOLS_CHAT_TEMPLATE`."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=byte_chat_backend(words),
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        extra_special_tokens=list(ROLE_TOKENS),
        chat_template=TOOLS_CHAT_TEMPLATE if tools else CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )


@dataclass(frozen=True)
class ModelSize:
    """The architecture knobs of a locally built Qwen2; the defaults are the smallest useful size, for quick
    tests with random weights."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 4096


def build_model(tokenizer: PreTrainedTokenizerBase, seed: int, size: ModelSize = ModelSize()) -> Qwen2ForCausalLM:
    """A freshly initialised Qwen2 (float32, sdpa) whose weights depend only on ``seed``, ``size`` and the
    vocabulary size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        attn_implementation="sdpa",
        dtype="float32",
        **asdict(size),
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    return model.to(torch.float32)
