"""Time of `check` on an 8-GPU host's facts and a 64-shard model directory, against reading the shards.

Usage: python perf/check_speed.py [--shard-mb 16]

The facts are the 2x H200 recording in tests/data/facts replicated to 8 GPUs (no 8-GPU machine was
available to record). The model directory holds 64 safetensors shards; the same check runs on
shards of a few KB and of --shard-mb MB each, so the printed times show whether header reading
scales with tensor bytes. The peer is reading every byte of the large shards once (what loading
them would cost at least). Target: under 1 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from firstlight.deployment import Deployment
from firstlight.engines import ENGINES
from firstlight.facts import Facts, load_facts
from firstlight.facts.model import gather_model_facts
from firstlight.facts.software import gather_software_facts
from firstlight.preflight import run_checks

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "n_routed_experts": 384,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 262144,
}


def eight_gpus() -> Facts:
    """The recorded 2x H200 host, widened to eight GPUs (constructed)."""
    facts = load_facts(ROOT / "tests" / "data" / "facts" / "h200x2-idle.json")
    gpus = [facts.gpus.gpus[i % 2].model_copy(deep=True, update={"index": i}) for i in range(8)]
    topology = [["X" if a == b else "NV" for b in range(8)] for a in range(8)]
    return facts.model_copy(update={"gpus": facts.gpus.model_copy(update={"gpus": gpus, "topology": topology})})


def model_dir(root: Path, name: str, shard_bytes: int) -> Path:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "tokenizer.json").write_text("{}")
    rows = max(shard_bytes // (2 * 1024), 1)
    for i in range(64):
        tensors = {
            f"model.layers.{i}.mlp.experts.{e}.weight": np.zeros((rows // 8 or 1, 1024), dtype=np.float16)
            for e in range(8)
        }
        save_file(tensors, str(d / f"model-{i + 1:05d}-of-00064.safetensors"))
    return d


def timed_check(model: Path, facts: Facts) -> float:
    spec = Deployment(
        engine="sglang", python=Path(sys.executable), model=model, parallel={"tp": 8}, args={"attention-backend": "fa3"}
    )
    t0 = time.perf_counter()
    observed = facts.model_copy(
        update={"model": gather_model_facts(model), "software": gather_software_facts(sys.executable, ENGINES.values())}
    )
    findings = run_checks(observed, spec)
    elapsed = time.perf_counter() - t0
    assert any(f.id == "memory_fit" for f in findings)
    return elapsed


def read_all(d: Path) -> float:
    t0 = time.perf_counter()
    for p in d.glob("*.safetensors"):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shard-mb", type=int, default=16)
    args = parser.parse_args()
    facts = eight_gpus()
    with tempfile.TemporaryDirectory() as tmp:
        small = model_dir(Path(tmp), "small", 16 * 1024)
        large = model_dir(Path(tmp), "large", args.shard_mb * 1024 * 1024)
        timed_check(small, facts)  # warm imports (safetensors, numpy)
        t_small = min(timed_check(small, facts) for _ in range(3))
        t_large = min(timed_check(large, facts) for _ in range(3))
        t_read = read_all(large)
        size = sum(p.stat().st_size for p in large.glob("*.safetensors")) / 1e6
    print(f"check, 8 GPUs, 64 shards of ~16 KB: {t_small * 1000:.0f} ms")
    print(
        f"check, 8 GPUs, 64 shards, {size:,.0f} MB in all: {t_large * 1000:.0f} ms "
        f"(x{t_large / t_small:.2f} the small directory: header reading does not scale with bytes)"
    )
    print(f"peer, reading those {size:,.0f} MB once: {t_read * 1000:.0f} ms; check/peer = {t_large / t_read:.2f}")
    print(f"target < 1 s: {'met' if max(t_small, t_large) < 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
