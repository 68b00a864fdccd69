"""The distillation teacher in this process: a Hugging Face causal LM that scores the tokens an episode holds,
batched across the episodes that finish together.

Needs the ``hf`` extra (torch and transformers). The teacher reads exactly the token ids the student's sampler
saw (an agent program's segments each as their own sequence), never a re-rendered conversation, so it must
share the student's vocabulary: a teacher whose tokenizer differs is refused before it scores anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.types import Trajectory

MAX_BATCH = 16
"""The most sequences one teacher forward scores."""


class Teacher:
    """A frozen causal LM that gives the log-prob of every token of a sequence after a given position, at
    temperature 1 (the teacher's own distribution)."""

    def __init__(self, folder: Path, device: str | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.folder = folder
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(self.device).eval()
        self.model.requires_grad_(False)

    def check_vocabulary(self, student_tokenizer: Any) -> None:
        """An error unless the student's tokenizer maps every token to the id the teacher's does."""
        student, teacher = student_tokenizer.get_vocab(), self.tokenizer.get_vocab()
        if student != teacher:
            differing = sorted(set(student.items()) ^ set(teacher.items()))[:3]
            raise AgentRLError(f"distillation.teacher {str(self.folder)!r}: its tokenizer is not the student's "
                               f"({len(teacher)} against {len(student)} tokens; first differences {differing}); the "
                               "teacher scores the student's token ids as sampled, so both need one vocabulary")

    @torch.no_grad()
    def logprobs(self, sequences: Sequence[tuple[Sequence[int], int]]) -> list[list[float]]:
        """For each ``(token_ids, start)``: ``log p(token_ids[i] | token_ids[:i])`` for every ``i >= start``
        (``start`` at least 1), scored in one right-padded forward."""
        if not sequences:
            return []
        width = max(len(ids) for ids, _ in sequences)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        attention = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, (tokens, start) in enumerate(sequences):
            if not 1 <= start <= len(tokens):
                raise ValueError(f"sequence {row}: start {start} outside [1, {len(tokens)}]")
            ids[row, :len(tokens)] = torch.tensor(list(tokens), dtype=torch.long)
            attention[row, :len(tokens)] = 1
        logits = self.model(input_ids=ids.to(self.device), attention_mask=attention.to(self.device)).logits
        scored = []
        for row, (tokens, start) in enumerate(sequences):
            rows = logits[row, start - 1:len(tokens) - 1].float().log_softmax(-1)
            targets = ids[row, start:len(tokens)].to(rows.device)
            scored.append(rows.gather(-1, targets[:, None])[:, 0].tolist())
        return scored


@dataclass(frozen=True)
class TeacherScore:
    """The teacher's log-prob of each response token, and this sequence's share of the forward that scored it
    (its wall time over the sequences in it)."""

    logprobs: list[float]
    seconds: float


@dataclass
class BatchingTeacher:
    """A :class:`Teacher` behind an async call: the episodes waiting while a forward runs are scored together in
    the next one (up to :data:`MAX_BATCH`), off the event loop."""

    teacher: Teacher
    max_batch: int = MAX_BATCH
    pending: list[tuple[tuple[Sequence[int], int], asyncio.Future[TeacherScore]]] = field(default_factory=list)
    draining: bool = False
    forwards: int = 0
    sequences: int = 0
    seconds: float = 0.0

    async def logprobs(self, token_ids: Sequence[int], start: int) -> TeacherScore:
        future: asyncio.Future[TeacherScore] = asyncio.get_running_loop().create_future()
        self.pending.append(((token_ids, start), future))
        if not self.draining:
            self.draining = True
            asyncio.ensure_future(self._drain())
        return await future

    async def score(self, trajectory: Trajectory) -> TeacherScore:
        """The teacher's log-prob of each of ``trajectory``'s response tokens, in its context."""
        if not trajectory.response_ids:
            return TeacherScore([], 0.0)
        return await self.logprobs(trajectory.token_ids, len(trajectory.prompt_ids))

    async def _drain(self) -> None:
        try:
            await asyncio.sleep(0)  # the episodes finishing in this turn of the loop join the first batch
            while self.pending:
                batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
                started = time.monotonic()
                try:
                    results = await asyncio.to_thread(self.teacher.logprobs, [request for request, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                elapsed = time.monotonic() - started
                self.forwards, self.sequences, self.seconds = (self.forwards + 1, self.sequences + len(batch),
                                                               self.seconds + elapsed)
                for (_, future), result in zip(batch, results):
                    if not future.done():
                        future.set_result(TeacherScore(result, elapsed / len(batch)))
        finally:
            self.draining = False
