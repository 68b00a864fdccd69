"""TinyAgent's tokenizer: one token per byte, whole-word tool names, and a chat template.

It is a byte-level BPE without merges, laid out exactly as ``Qwen2Tokenizer``
builds one (NFC, Qwen's split regex, byte-level pre-tokenizer and decoder), so
``AutoTokenizer`` (which always loads a Qwen2 checkpoint's tokenizer as
``Qwen2Tokenizer``) and ``PreTrainedTokenizerFast`` give the same ids. Every
ASCII character (``"\\n"`` included) is one token, any other character is its
UTF-8 bytes, so every NFC string round-trips. The gym's tool grammar words
(``<tool>``, ``read``, ``edit``, every edit-op name) are single tokens, so a tool
call is a handful of tokens.
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<|pad|>", "<|end|>", "<|unk|>"
ROLES = ("system", "user", "assistant", "tool")
ROLE_TOKENS = tuple(f"<|{role}|>" for role in ROLES)
SPECIALS = (PAD, EOS, UNK) + ROLE_TOKENS
WORDS = ("<tool>", "</tool>", "read", "test", "edit ", "edit", "submit")
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
              r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def edit_op_names() -> tuple[str, ...]:
    """Every edit-op name of every BugFix family, in first-seen order."""
    from bugfix_gym.families import FAMILIES

    return tuple(dict.fromkeys(name for family in FAMILIES for name in family.op_names))


def byte_symbols() -> list[str]:
    """The 256 byte-level symbols in byte order (GPT-2's ``bytes_to_unicode``)."""
    printable = {*range(33, 127), *range(161, 173), *range(174, 256)}
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The TinyAgent tokenizer (deterministic: the same vocabulary on every call)."""
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
    backend.add_tokens([AddedToken(word, special=False, normalized=False) for word in WORDS + edit_op_names()])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        extra_special_tokens=list(ROLE_TOKENS),
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )
