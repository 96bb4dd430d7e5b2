"""What both tiny models share: the seeded synthetic corpus and the BPE tokenizer trained on it.

`make_tiny_model.py` (Hugging Face format) and `make_tiny_gguf.py` (GGUF for llama.cpp) lay the same
trained pieces out for their formats, so both tiny models tokenize alike. Standard library and
`tokenizers` only: no torch.
"""

from __future__ import annotations

import random
from typing import Any

SEED = 1234
SPECIALS = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{i:02X}>" for i in range(256)]
VOCAB_TARGET = 1283
SPACE = "\u2581"  # SentencePiece's "lower one eighth block", which stands for a space inside a piece
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + '</s>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
WORDS = [
    "the",
    "model",
    "serves",
    "tokens",
    "from",
    "weights",
    "on",
    "eight",
    "GPUs",
    "while",
    "the",
    "operator",
    "watches",
    "phases",
    "load",
    "shards",
    "allocate",
    "cache",
    "capture",
    "graphs",
    "listen",
    "warm",
    "ready",
    "bench",
    "latency",
    "throughput",
    "request",
    "stream",
    "chunk",
    "prompt",
    "output",
    "speculative",
    "draft",
    "accept",
    "verify",
    "batch",
    "queue",
    "memory",
    "tensor",
    "parallel",
    "expert",
    "attention",
    "kernel",
    "backend",
    "launch",
    "stall",
    "fail",
    "diagnose",
    "remedy",
]


def synthetic_corpus(n_lines: int = 4000) -> list[str]:
    """Seeded pseudo-sentences from WORDS, with some numbers and punctuation so those get pieces too."""
    rng = random.Random(SEED)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 20))]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 9999)))
        lines.append(" ".join(words) + rng.choice([".", ",", "!", "?", ""]))
    return lines


def train_pieces() -> Any:
    """A BPE tokenizer with byte fallback trained on the corpus: its vocabulary numbers the learned pieces in
    the order the trainer made them (the alphabet, then one per merge). Metaspace with a prefix on the
    first word only matches both HF Llama tokenizers and llama.cpp's SPM tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first")
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET - len(SPECIALS) - len(BYTE_TOKENS), special_tokens=[], show_progress=False
    )
    tok.train_from_iterator(synthetic_corpus(), trainer=trainer)
    return tok
