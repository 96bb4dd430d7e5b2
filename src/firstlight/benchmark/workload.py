"""The requests to send: prompts with exact input token counts and exact output lengths.

Token counts come from the server's own tokenizer where it has one (`/tokenize`, `/detokenize`:
vLLM), else from a tokenizer loaded from the model directory (`tokenizer.json`, through the
`tokenizers` library), else words are used and the counts are marked approximate. The workload
says which it used.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from firstlight.benchmark import endpoint
from firstlight.benchmark.config import BenchConfig

WORDS = [
    "time",
    "person",
    "year",
    "way",
    "day",
    "thing",
    "man",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "eye",
    "woman",
    "place",
    "work",
    "week",
    "case",
    "point",
    "government",
    "company",
    "number",
    "group",
    "problem",
    "fact",
    "be",
    "have",
    "do",
    "say",
    "get",
    "make",
    "go",
    "know",
    "take",
    "see",
    "come",
    "think",
    "look",
    "want",
    "give",
    "use",
    "find",
    "tell",
    "ask",
    "seem",
    "feel",
    "try",
    "leave",
    "call",
    "good",
    "new",
    "first",
    "last",
    "long",
    "great",
    "little",
    "own",
    "other",
    "old",
    "right",
    "big",
    "high",
    "different",
    "small",
    "large",
    "next",
    "early",
    "young",
    "important",
    "few",
    "public",
    "bad",
    "same",
    "able",
]


@dataclass
class Prompt:
    text: str
    input_tokens: int | None  # as counted by the tokenizer in use; None when approximate
    output_tokens: int


@dataclass
class Workload:
    prompts: list[Prompt]
    tokenizer: str  # "server /tokenize", "local <path>", or "approximate (words)"
    source: str  # "synthetic" or the dataset file
    body_fields: dict[str, Any] = field(default_factory=dict)

    def bodies(self, model: str, kind: str, extra: dict[str, Any]) -> list[bytes]:
        """Every request body, serialised once before the run: nothing is encoded on the hot path."""
        return [
            endpoint.encode(endpoint.request_body(kind, model, p.text, p.output_tokens, **extra)) for p in self.prompts
        ]


class Tokenizer:
    """encode/decode through the server's endpoints or a local tokenizer.json."""

    def __init__(self, name: str, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> None:
        self.name, self.encode, self.decode = name, encode, decode

    @classmethod
    def from_server(cls, url: str, model: str) -> Tokenizer | None:
        client = httpx.Client(base_url=url, timeout=30, trust_env=False)

        def encode(text: str) -> list[int]:
            r = client.post("/tokenize", json={"model": model, "prompt": text})
            r.raise_for_status()
            return list(r.json()["tokens"])

        def decode(ids: list[int]) -> str:
            r = client.post("/detokenize", json={"model": model, "tokens": ids})
            r.raise_for_status()
            return str(r.json()["prompt"])

        try:
            decode(encode("hello world"))
        except (httpx.HTTPError, KeyError, ValueError):
            client.close()
            return None
        return cls("server /tokenize", encode, decode)

    @classmethod
    def from_dir(cls, path: Path) -> Tokenizer | None:
        file = path / "tokenizer.json"
        if not file.is_file():
            return None
        from tokenizers import Tokenizer as HFTokenizer

        tok = HFTokenizer.from_file(str(file))
        return cls(f"local {file}", lambda t: tok.encode(t).ids, lambda ids: tok.decode(ids))


def synthetic(n: int, input_len: int, output_len: int, tokenizer: Tokenizer | None, seed: int = 0) -> Workload:
    rng = random.Random(seed)
    if tokenizer is None:
        prompts = [Prompt(" ".join(rng.choice(WORDS) for _ in range(input_len)), None, output_len) for _ in range(n)]
        return Workload(prompts, "approximate (words)", "synthetic")
    text = " ".join(rng.choice(WORDS) for _ in range(input_len * 4 + 2000))
    pool = tokenizer.encode(text)
    prompts = []
    for i in range(n):
        start = rng.randrange(0, max(len(pool) - input_len - 64, 1))
        prompt, count = exact_prompt(tokenizer, pool, start, input_len, prefix=f"{i} ")
        prompts.append(Prompt(prompt, count, output_len))
    return Workload(prompts, tokenizer.name, "synthetic")


def exact_prompt(tok: Tokenizer, pool: list[int], start: int, target: int, prefix: str) -> tuple[str, int]:
    """A text of exactly `target` tokens (as the tokenizer counts, special tokens included): a unique
    prefix (so no two prompts share a cached prefix), then pool tokens, re-counted and adjusted because
    decoding and re-encoding can merge tokens at the joins."""
    want = target - len(tok.encode(prefix))
    best = (prefix, len(tok.encode(prefix)))
    for _ in range(8):
        if want <= 0:
            break
        text = prefix + tok.decode(pool[start : start + want])
        count = len(tok.encode(text))
        if abs(count - target) < abs(best[1] - target):
            best = (text, count)
        if count == target:
            break
        want += target - count
    return best


def from_dataset(path: Path, n: int, output_len: int | None, tokenizer: Tokenizer | None, seed: int = 0) -> Workload:
    """ShareGPT JSON (conversations; the first human turn is the prompt, the reply's length the output
    length) or JSONL with `prompt` and `output_len`."""
    text = path.read_text()
    items: list[tuple[str, int | None]] = []
    if path.suffix == ".jsonl":
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                items.append((str(obj["prompt"]), int(obj["output_len"]) if obj.get("output_len") else None))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f'{path}:{i}: expected {{"prompt": ..., "output_len": N}} ({e})') from e
    else:
        data = json.loads(text)
        for conv in data if isinstance(data, list) else []:
            turns = conv.get("conversations") or conv.get("messages") or []
            human = next((t for t in turns if t.get("from") in ("human", "user") or t.get("role") == "user"), None)
            reply = next(
                (t for t in turns if t.get("from") in ("gpt", "assistant") or t.get("role") == "assistant"), None
            )
            if human is None:
                continue
            prompt = human.get("value") or human.get("content") or ""
            out = None
            if reply is not None and tokenizer is not None:
                out = len(tokenizer.encode(reply.get("value") or reply.get("content") or ""))
            items.append((prompt, out))
    if not items:
        raise ValueError(f"{path}: no prompts found (ShareGPT JSON or JSONL with prompt and output_len)")
    rng = random.Random(seed)
    rng.shuffle(items)
    prompts = []
    for i in range(n):
        prompt, out = items[i % len(items)]
        count = len(tokenizer.encode(prompt)) if tokenizer is not None else None
        prompts.append(Prompt(prompt, count, max(int(out or output_len or 128), 1)))
    return Workload(prompts, tokenizer.name if tokenizer else "none (server usage only)", str(path))


def build_workload(cfg: BenchConfig, model: str, n: int) -> Workload:
    """The run's n prompts, counted by the best tokenizer at hand: the server's, else the model directory's."""
    tokenizer = Tokenizer.from_server(cfg.url, model)
    if tokenizer is None and cfg.tokenizer_dir:
        tokenizer = Tokenizer.from_dir(Path(cfg.tokenizer_dir))
    if cfg.dataset:
        return from_dataset(Path(cfg.dataset), n, cfg.output_len, tokenizer, cfg.seed)
    return synthetic(n, cfg.input_len, cfg.output_len, tokenizer, cfg.seed)
