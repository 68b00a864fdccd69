"""TinyAgent's model: a small random-init Qwen2 causal LM, float32, sdpa attention."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from transformers import PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM


@dataclass(frozen=True)
class ModelSize:
    """The architecture knobs of TinyAgent (part of the warm-start cache key); the defaults are the smallest
    useful size, for quick tests with random weights."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 4096


TINYAGENT_SIZE = ModelSize(hidden_size=128, num_hidden_layers=4, intermediate_size=512)
"""The warm-started TinyAgent's size: at it the warm start reads a held-out task's edit menu; at the smaller
defaults it named ops that are not in the menu."""


def build_model(tokenizer: PreTrainedTokenizerBase, seed: int, size: ModelSize = ModelSize()) -> Qwen2ForCausalLM:
    """A freshly initialised Qwen2 whose weights depend only on ``seed``, ``size`` and the vocabulary size."""
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
