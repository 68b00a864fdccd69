"""The distillation teacher: log-probs of given tokens equal a plain forward's, batched across waiting episodes."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.local_models import build_model, byte_chat_tokenizer
from agentrl_plugins.teacher import BatchingTeacher, Teacher
from agentrl_plugins.types import Trajectory


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("teacher")
    build_model(tokenizer, seed=3).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Teacher(folder, device="cpu")


def plain(model, ids, start):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, start - 1:-1].log_softmax(-1)
    return logits.gather(-1, torch.tensor(ids[start:])[:, None])[:, 0]


def test_padded_batches_score_each_sequence_as_alone(teacher, tokenizer):
    sequences = [(tokenizer.encode("a short one"), 3), (tokenizer.encode("a rather longer sequence to score"), 10)]
    scored = teacher.logprobs(sequences)
    for (ids, start), values in zip(sequences, scored):
        assert len(values) == len(ids) - start
        assert torch.allclose(torch.tensor(values), plain(teacher.model, ids, start), atol=1e-5)
    with pytest.raises(ValueError, match="start 0 outside"):
        teacher.logprobs([(ids, 0)])


def test_episodes_waiting_together_share_one_forward_and_failures_reach_every_caller(teacher, tokenizer):
    batching = BatchingTeacher(teacher, max_batch=4)
    episodes = [Trajectory("t", tokenizer.encode(f"prompt {i}"), tokenizer.encode("x" * (i + 1)), [1] * (i + 1),
                           [0.0] * (i + 1), [(0, i + 1)], "submitted") for i in range(6)]

    async def score_all():
        return await asyncio.gather(*(batching.score(e) for e in episodes))

    scored = asyncio.run(score_all())
    assert [len(score.logprobs) for score in scored] == [1, 2, 3, 4, 5, 6]
    assert (batching.forwards, batching.sequences) == (2, 6), "six waiting episodes, batches of at most four"
    assert all(score.seconds > 0 for score in scored)
    assert sum(score.seconds for score in scored) == pytest.approx(batching.seconds), "shares of the forwards' time"
    assert scored[0].seconds == scored[3].seconds != scored[4].seconds, "one share per batch"
    assert torch.allclose(torch.tensor(scored[5].logprobs), plain(teacher.model, episodes[5].token_ids,
                                                         len(episodes[5].prompt_ids)), atol=1e-5)
    broken = BatchingTeacher(teacher)
    with pytest.raises(ValueError, match="outside"):
        asyncio.run(broken.logprobs([1, 2], 5))
    assert asyncio.run(broken.logprobs([1, 2, 3], 1)) and not broken.draining, "a failed batch leaves it usable"


def test_a_teacher_of_another_vocabulary_is_refused(teacher):
    teacher.check_vocabulary(teacher.tokenizer)
    with pytest.raises(AgentRLError, match="its tokenizer is not the student's"):
        teacher.check_vocabulary(byte_chat_tokenizer(["extra_word"]))
