"""Build a tiny, randomly initialised Llama and a locally trained tokenizer.

Runs in the *engine's* environment (torch, transformers, tokenizers); firstlight itself never
imports torch. Nothing is downloaded from a model hub.

The weights are arranged so that the model never emits EOS, another special token or a byte
fallback token: residual dimension 0 is held at a constant positive value (embedding column 0 is
1 and nothing writes to it), and the lm_head rows of those tokens read that dimension with a
weight of -1000. Every request therefore yields exactly `max_tokens` tokens of plain text, which
makes token counts and throughput comparable across runs and engines.

Usage: python tools/make_tiny_model.py OUTPUT_DIR [--shape tiny|llama3-8b] [--dtype float32|bfloat16]
                                                   [--device cpu|cuda]
`--shape llama3-8b` keeps Llama-3-8B's layers, widths and heads (with this tokenizer's small vocabulary),
for a realistic load on a GPU; build it there with `--dtype bfloat16 --device cuda`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tiny_corpus import BYTE_TOKENS, CHAT_TEMPLATE, SEED, SPECIALS, train_pieces


def build_tokenizer(out: Path):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    trainer_tok = train_pieces()
    learned = trainer_tok.get_vocab()
    state = json.loads(trainer_tok.to_str())["model"]
    # Llama-2 layout: specials first, then the 256 byte tokens, then learned pieces.
    vocab: dict[str, int] = {}
    for tok in SPECIALS + BYTE_TOKENS:
        vocab[tok] = len(vocab)
    for tok, _ in sorted(learned.items(), key=lambda kv: kv[1]):
        if tok not in vocab:
            vocab[tok] = len(vocab)
    merge_pairs = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merge_pairs, unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast, vocab


SHAPES = {
    "tiny": {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "max_position_embeddings": 2048,
    },
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
    },
}


def build_model(
    out: Path, vocab: dict[str, int], shape: str = "tiny", dtype: str = "float32", device: str = "cpu"
) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(vocab),
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=False,
        torch_dtype=dtype,
        **SHAPES[shape],
    )
    torch.set_default_dtype(getattr(torch, dtype))
    with torch.device(device):
        model = LlamaForCausalLM(config)
    banned = [vocab[t] for t in SPECIALS + BYTE_TOKENS]
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 1.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[banned, 0] = -1000.0
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model.save_pretrained(out, safe_serialization=True)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    _, vocab = build_tokenizer(out)
    build_model(out, vocab, args.shape, args.dtype, args.device)
    print(f"tiny model written to {out} (vocab {len(vocab)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
