"""The CPU profile's packed-sequence attention (``agentrl_packed_sdpa``) against transformers' ``sdpa``.

verl's actor reads a micro-batch as one packed row: its sequences back to back, ``position_ids`` restarting at each
(and a padding sequence after them where verl pads the row). Each sequence must see only itself: the packed
attention gives sdpa's numbers (its dense block-diagonal mask) within float rounding, forward and backward, and a
padded batch goes to sdpa as it is."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentrl_verl.cpu.attention import PACKED_ATTENTION, register, sequence_starts

LENGTHS = [430, 380, 214, 7]


@pytest.fixture(scope="module")
def models(model_dir):
    register()
    return {name: AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=name, dtype=torch.float32)
            for name in ("sdpa", PACKED_ATTENTION)}


def forward_backward(model, **inputs) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    logits = model(**inputs, use_cache=False).logits  # as verl's actor calls it (a cache turns packing detection off)
    torch.log_softmax(logits, -1)[..., 5].sum().backward()
    return logits.detach(), [parameter.grad.clone() for parameter in model.parameters()]


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def test_each_packed_sequence_attends_within_itself_as_sdpas_mask_says(models):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 200, (1, sum(LENGTHS)), generator=generator)
    positions = torch.cat([torch.arange(length) for length in LENGTHS])[None]
    assert sequence_starts(positions) == [0, 430, 810, 1024, 1031]
    logits, grads = forward_backward(models[PACKED_ATTENTION], input_ids=ids, position_ids=positions)
    expected_logits, expected_grads = forward_backward(models["sdpa"], input_ids=ids, position_ids=positions)
    assert relative(logits, expected_logits) < 1e-5
    assert max(relative(g, e) for g, e in zip(grads, expected_grads)) < 1e-5
    alone, _ = forward_backward(models["sdpa"], input_ids=ids[:, 430:810], position_ids=positions[:, 430:810])
    assert relative(logits[:, 430:810], alone) < 1e-5, "the second sequence as if it were alone"


def test_a_padded_batch_goes_to_sdpa_unchanged(models):
    ids = torch.randint(5, 200, (2, 40), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    logits, _ = forward_backward(models[PACKED_ATTENTION], input_ids=ids, attention_mask=mask)
    expected, _ = forward_backward(models["sdpa"], input_ids=ids, attention_mask=mask)
    assert torch.equal(logits, expected)
