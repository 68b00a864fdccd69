"""Warm-starting TinyAgent: TRL SFT on scripted BugFix transcripts, cached by seed and build settings.

Transcripts are played through the real episode runner with scripted replies,
so the model is trained on exactly the token ids the runner will later show
it (system prompt, task prompt, one tool call per assistant turn, observations
as user turns); the loss covers only the assistant tokens (the runner's mask).
Only ``train`` families and their renamed variants are played.

The skill that carries over to held-out families is reading the menu: in
*renamed* variants of a train family the fix op goes by another op's name
(still first in the menu, as in every gym family) and the rest of the menu is
shuffled with extra ops that change nothing, so the edit to make can only be
read off the prompt, never recalled from the issue text. Copying the first
menu op is an attention circuit a small model finds only when that one token
carries the loss: full transcripts dilute it among ~25 easy tool-call tokens
and the model stays at chance (1 in 7 ops) for 1,000+ steps, so variants are
played as *first-turn* rows (the prompt and the first reply only).

The warm-started agent is a sloppy one on purpose: it edits straight away,
and in about 40% of its first moves it plays the ``hardcode_tests`` exploit
(the hacker's script) instead of the fix. Its starting pass@1 is therefore
middling, and what RL has to learn is the book's lesson: rewarded by hidden
tests it unlearns the exploit and fixes more bugs; rewarded by public tests
it learns to hack.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Coroutine

import torch
from transformers import AutoTokenizer, Qwen2ForCausalLM

from agentrl_plugins.episode import run_episode, run_episodes
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.scripted import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling, Trajectory

from agentrl_tinyagent.cache import BASE_SEED, WarmStartSettings, model_path
from agentrl_tinyagent.model import build_model
from agentrl_tinyagent.tokenizer import build_tokenizer

SCRIPT_LIMITS = Limits(max_turns=6, max_context_tokens=4096, max_new_tokens_per_turn=64)
EVAL_LIMITS = Limits(max_turns=6, max_context_tokens=2048, max_new_tokens_per_turn=16)


def run_sync(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine to completion, also from inside a running event loop (on a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


@dataclass(frozen=True)
class Play:
    """One scripted episode of the curriculum; a ``first_turn_only`` row keeps the prompt and the first reply."""

    family: str
    script: tuple[str, ...]
    first_turn_only: bool = False


def curriculum(settings: WarmStartSettings, seed: int) -> tuple[list[Any], list[Play]]:
    """The families to play (train families and their renamed variants) and the plays."""
    from bugfix_gym import policies
    from bugfix_gym.families import FAMILIES
    from bugfix_gym.variants import renamed_variant

    generator = torch.Generator().manual_seed(seed)
    train = [family for family in FAMILIES if family.split == "train"]
    families, plays = list(train), []
    for family in train:
        plays += [Play(family.name, tuple(policies.fixer(family)))] * settings.fixer
        plays += [Play(family.name, tuple(policies.hacker(family)))] * settings.hacker
        for index in range(settings.renamed + settings.renamed_hacker):
            variant = renamed_variant(family, index, generator, settings.max_distractors)
            script = policies.fixer(variant) if index < settings.renamed else policies.hacker(variant)
            families.append(variant)
            plays.append(Play(variant.name, tuple(script), first_turn_only=True))
    return families, plays


def transcript_row(trajectory: Trajectory, first_turn_only: bool) -> dict[str, list[int]]:
    """A trajectory's token ids with its assistant mask, cut after the first reply when asked."""
    ids, mask = trajectory.token_ids, [0] * len(trajectory.prompt_ids) + trajectory.response_mask
    if first_turn_only:
        end = len(trajectory.prompt_ids) + trajectory.turn_spans[0][1]
        ids, mask = ids[:end], mask[:end]
    return {"input_ids": ids, "assistant_masks": mask}


def transcripts(tokenizer: Any, settings: WarmStartSettings, seed: int) -> list[dict[str, list[int]]]:
    """Token ids and assistant masks of the scripted episodes, as the episode runner renders them."""
    from bugfix_gym.env import BugFixGym
    from bugfix_gym.verifiers import hidden_tests

    families, plays = curriculum(settings, seed)
    gym = BugFixGym(families)
    tasks = {task.family: task for task in gym.tasks()}

    async def play() -> list[Trajectory]:
        return await asyncio.gather(*[
            run_episode(gym, tasks[p.family], ScriptedGenerate(list(p.script), tokenizer), tokenizer,
                        SCRIPT_LIMITS, verifier=hidden_tests)
            for p in plays])

    try:
        played = run_sync(play)
    finally:
        gym.close()
    return [transcript_row(t, p.first_turn_only) for t, p in zip(played, plays)]


def _unmasked_collator(pad_token_id: int) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """TRL's right-padding collator without the attention mask.

    Under causal attention no real token sees a later pad (pads carry label
    -100), so dropping the mask changes nothing but lets sdpa use its unmasked
    causal kernel, several times faster on a CPU; plain ``position_ids`` are
    what TRL counts tokens from instead.
    """
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    pad = DataCollatorForLanguageModeling(pad_token_id=pad_token_id)

    def collate(examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = pad(examples)
        batch.pop("attention_mask")
        batch["position_ids"] = torch.arange(batch["input_ids"].shape[1]).expand_as(batch["input_ids"])
        return batch

    return collate


def _train(model: Any, tokenizer: Any, rows: list[dict[str, list[int]]], settings: WarmStartSettings,
           seed: int, log: Callable[[str], None]) -> None:
    try:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer
    except ImportError as error:
        raise AgentRLError(
            'building the TinyAgent warm start needs TRL: pip install "agentrl-tinyagent[warmstart]" and build '
            "it once there, or set AGENTRL_CACHE to a cache that already holds it"
        ) from error
    from transformers import PrinterCallback, TrainerCallback

    class Progress(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                log(f"tinyagent sft step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f}")

    with tempfile.TemporaryDirectory() as scratch:
        config = SFTConfig(
            output_dir=scratch, max_steps=settings.max_steps, per_device_train_batch_size=settings.batch_size,
            learning_rate=settings.learning_rate, lr_scheduler_type="cosine", warmup_steps=settings.warmup_steps,
            weight_decay=0.0, logging_steps=50, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
            seed=seed, data_seed=seed, dataloader_num_workers=0, max_length=None, disable_tqdm=True,
            push_to_hub=False, gradient_checkpointing=False,
        )
        trainer = SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer, data_collator=_unmasked_collator(tokenizer.pad_token_id),
                             callbacks=[Progress()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()


def warm_start(seed: int = BASE_SEED, cache_dir: str | os.PathLike | None = None,
               settings: WarmStartSettings = WarmStartSettings(), log: Callable[[str], None] = print) -> Path:
    """Build (or find cached) the warm-started TinyAgent for ``seed``; returns its ``save_pretrained`` folder."""
    path = model_path(seed, cache_dir, settings)
    if (path / "config.json").exists():
        return path
    started = time.monotonic()
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer, seed, settings.size)
        rows = transcripts(tokenizer, settings, seed)
        log(f"tinyagent: {len(rows)} scripted transcripts, {sum(len(r['input_ids']) for r in rows)} tokens")
        _train(model, tokenizer, rows, settings, seed, log)
    finally:
        torch.set_num_threads(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    seconds = time.monotonic() - started
    (staging / "warmstart.json").write_text(json.dumps({"seed": seed, "settings": asdict(settings),
                                                        "build_seconds": round(seconds, 1)}, indent=2))
    try:
        staging.rename(path)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"tinyagent: built {path} in {seconds:.0f}s")
    return path


def pass_at_1(model: Any, tokenizer: Any, split: str, episodes_per_family: int = 8, seed: int = 0,
              limits: Limits = EVAL_LIMITS, sampling: Sampling = Sampling(temperature=1.0)) -> float:
    """Mean hidden-tests reward of ``episodes_per_family`` sampled episodes on every family of ``split``."""
    from agentrl_plugins.hf_sampler import HFGenerator

    from bugfix_gym.env import BugFixGym
    from bugfix_gym.verifiers import hidden_tests

    gym = BugFixGym()
    generate = HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed)
    try:
        played = run_sync(lambda: run_episodes(gym, gym.tasks(split), generate, tokenizer, limits,
                                               group_size=episodes_per_family, verifier=hidden_tests,
                                               sampling=sampling))
    finally:
        gym.close()
    return sum(t.reward for t in played) / len(played)


def load_tinyagent(seed: int = BASE_SEED, cache_dir: str | os.PathLike | None = None,
                   settings: WarmStartSettings = WarmStartSettings()) -> tuple[Qwen2ForCausalLM, Any]:
    """The warm-started TinyAgent ``(model, tokenizer)`` for ``seed``, built on first use and cached.

    The cache is ``cache_dir``, else ``$AGENTRL_CACHE/tinyagent``, else ``~/.cache/agentrl/tinyagent``.
    """
    path = warm_start(seed, cache_dir, settings)
    model = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return model, AutoTokenizer.from_pretrained(path)
