"""Write a tiny, randomly initialised Llama as a single F32 GGUF file, without torch.

This is the llama.cpp counterpart of `make_tiny_model.py`: the same architecture (hidden 256, 2 layers,
4 attention heads, 2 KV heads, head_dim 64, context 2048) and the same kind of tokenizer (BPE with byte
fallback, trained here on a seeded synthetic corpus), written with the `gguf` PyPI package so that an
engine such as llama.cpp's `llama-server` can load it. It needs only `pip install gguf tokenizers numpy`;
nothing is downloaded from a model hub.

The weights are arranged so that the model never emits EOS, another special token or a byte-fallback
token: residual dimension 0 is held at a constant positive value (embedding column 0 is 1 and no layer
writes to it), and the output rows of those tokens read that dimension with a weight of -1000. Every
request therefore yields exactly `max_tokens` tokens of plain text, so token counts and throughput are
comparable across runs and engines.

The output is deterministic: the corpus, the tokenizer training and the weights all use fixed seeds.

Usage: python tools/make_tiny_gguf.py OUT.gguf [--layers N] [--hidden H] [--intermediate I]
The size options make a bigger file with the same tokenizer, e.g. to see an engine's "loading" phase.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tiny_corpus import BYTE_TOKENS, CHAT_TEMPLATE, SEED, SPECIALS, train_pieces

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
HEAD_DIM = 64
CONTEXT_LENGTH = 2048
INIT_STD = 0.02  # the usual initializer_range of HF Llama configs
BANNED_LOGIT_WEIGHT = -1000.0


@dataclass(frozen=True)
class Shape:
    hidden: int = 256
    intermediate: int = 512
    layers: int = 2

    @property
    def heads(self) -> int:
        return self.hidden // HEAD_DIM

    @property
    def kv_heads(self) -> int:
        # Grouped-query attention with two query heads per KV head, as in the HF tiny model.
        return max(1, self.heads // 2)


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]


def train_vocab() -> Vocab:
    """Train a BPE tokenizer and lay its vocabulary out the way a Llama-2 SentencePiece GGUF expects."""
    from gguf import TokenType

    # llama.cpp's SPM tokenizer turns spaces into U+2581 and adds one leading space (add_space_prefix
    # defaults to true for "llama"), as the trained pre-tokenizer does.
    learned = json.loads(train_pieces().to_str())["model"]["vocab"]

    # Llama-2 layout: the specials, then the 256 byte-fallback tokens, then the learned pieces.
    tokens = SPECIALS + BYTE_TOKENS
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * len(BYTE_TOKENS)
    scores = [0.0] * len(tokens)
    seen = set(tokens)
    # The trainer numbers its pieces in the order it created them: the alphabet first, then one id
    # per merge. llama.cpp's SPM tokenizer merges the pair whose result has the highest score, so a
    # score that falls with the id replays the BPE merges in their learned order.
    for piece, piece_id in sorted(learned.items(), key=lambda kv: kv[1]):
        if piece in seen:
            continue
        seen.add(piece)
        tokens.append(piece)
        types.append(TokenType.NORMAL)
        scores.append(-float(piece_id))
    return Vocab(tokens=tokens, scores=scores, types=[int(t) for t in types])


def make_weights(shape: Shape, n_vocab: int, banned: list[int]) -> dict[str, np.ndarray]:
    """Random F32 tensors named and shaped as llama.cpp's `llama` architecture reads them.

    Arrays are (out_features, in_features) like PyTorch Linear weights; the gguf writer reverses
    the dimensions into GGML order. Q and K need no RoPE permutation because the weights are random.
    """
    rng = np.random.default_rng(SEED)

    def normal(*dims: int) -> np.ndarray:
        return rng.normal(0.0, INIT_STD, size=dims).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    h, ff = shape.hidden, shape.intermediate
    q_dim, kv_dim = shape.heads * HEAD_DIM, shape.kv_heads * HEAD_DIM
    embd = normal(n_vocab, h)
    embd[:, 0] = 1.0  # residual dimension 0 starts at 1 for every token ...
    tensors: dict[str, np.ndarray] = {"token_embd.weight": embd}
    for i in range(shape.layers):
        attn_out = normal(h, q_dim)
        ffn_down = normal(h, ff)
        # ... and stays there, because no block adds anything to it.
        attn_out[0, :] = 0.0
        ffn_down[0, :] = 0.0
        tensors.update(
            {
                f"blk.{i}.attn_norm.weight": ones(h),
                f"blk.{i}.attn_q.weight": normal(q_dim, h),
                f"blk.{i}.attn_k.weight": normal(kv_dim, h),
                f"blk.{i}.attn_v.weight": normal(kv_dim, h),
                f"blk.{i}.attn_output.weight": attn_out,
                f"blk.{i}.ffn_norm.weight": ones(h),
                f"blk.{i}.ffn_gate.weight": normal(ff, h),
                f"blk.{i}.ffn_up.weight": normal(ff, h),
                f"blk.{i}.ffn_down.weight": ffn_down,
            }
        )
    output = normal(n_vocab, h)
    # After the final RMS norm dimension 0 is large and positive, so these rows give the banned
    # tokens a hugely negative logit whatever the context; sampling can never pick them.
    output[banned, 0] = BANNED_LOGIT_WEIGHT
    tensors["output_norm.weight"] = ones(h)
    tensors["output.weight"] = output
    return tensors


def write_gguf(out: Path, shape: Shape, vocab: Vocab) -> int:
    """Write metadata, tokenizer and tensors; return the parameter count."""
    import gguf

    banned = [i for i, t in enumerate(vocab.types) if t != gguf.TokenType.NORMAL]
    tensors = make_weights(shape, len(vocab.tokens), banned)
    n_params = sum(int(t.size) for t in tensors.values())

    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name("Tiny Llama")
    writer.add_size_label(f"{n_params / 1e6:.1f}M")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_block_count(shape.layers)
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.intermediate)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(vocab.tokens))

    writer.add_tokenizer_model("llama")  # SentencePiece-style tokenizer with scores and byte fallback
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_unk_token_id(UNK_ID)
    writer.add_pad_token_id(EOS_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    for name, data in tensors.items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return n_params


def main() -> int:
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("out", type=Path, help="path of the .gguf file to write")
    parser.add_argument("--layers", type=int, default=Shape.layers)
    parser.add_argument("--hidden", type=int, default=Shape.hidden, help=f"a multiple of {2 * HEAD_DIM}")
    parser.add_argument("--intermediate", type=int, default=Shape.intermediate)
    args = parser.parse_args()
    if args.hidden % (2 * HEAD_DIM) or args.layers < 1 or args.intermediate < 1:
        parser.error(f"--hidden must be a multiple of {2 * HEAD_DIM}; --layers and --intermediate positive")
    shape = Shape(hidden=args.hidden, intermediate=args.intermediate, layers=args.layers)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    vocab = train_vocab()
    n_params = write_gguf(args.out, shape, vocab)
    print(f"tiny GGUF written to {args.out} (vocab {len(vocab.tokens)}, {n_params:,} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
