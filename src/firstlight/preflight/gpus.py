"""The GPUs the launch will use: free of other processes, enough of them, of one kind, divisible by the model."""

from __future__ import annotations

from typing import Any

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts, Gpu, GpuProcess
from firstlight.preflight.finding import Finding, available_gpus, fail, ok, used_gpus, warn
from firstlight.preflight.memory import memory_fraction

FIND_GPU_PROCS = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"


def check_gpu_processes(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    gpus = used_gpus(facts, dep)
    if not gpus:
        return [ok("gpu_processes", "no GPU in use by this launch")]
    fraction = memory_fraction(dep, engine)
    holders = [(g, p) for g in gpus for p in g.processes if p.used_gib > 0]
    free = [g.memory.free_gib for g in gpus]
    evidence = _evidence(gpus, holders)
    who = "; ".join(f"pid {p.pid} ({p.who}) holds {p.used_gib:.1f} GiB on GPU {g.index}" for g, p in holders)
    remedy = _remedy(holders)
    balance = engine.memory.tp_balance
    if balance is not None and dep.parallel.tp > 1 and min(free) < balance * max(free):
        return [
            fail(
                "gpu_processes",
                f"free memory differs across the TP GPUs ({min(free):.1f} vs {max(free):.1f} "
                f"GiB): {engine.name} aborts with '{engine.memory.tp_balance_error}'. {who}",
                remedy,
                **evidence,
            )
        ]
    short = [g for g in gpus if g.memory.free_gib < fraction * g.memory.total_gib]
    if short:
        g = short[0]
        want = fraction * g.memory.total_gib
        cause = who or f"{g.memory.used_gib:.1f} GiB is in use by processes not visible here"
        return [
            fail(
                "gpu_processes",
                f"GPU {g.index} has {g.memory.free_gib:.1f} of "
                f"{g.memory.total_gib:.1f} GiB free, less than the {want:.1f} GiB the launch claims "
                f"(memory fraction {fraction}): {cause}",
                remedy,
                **evidence,
            )
        ]
    if holders:
        return [
            warn(
                "gpu_processes",
                f"other processes hold GPU memory, but the launch still fits: {who}",
                remedy,
                **evidence,
            )
        ]
    return [ok("gpu_processes", f"no other process on GPU(s) {', '.join(str(g.index) for g in gpus)}", **evidence)]


def _evidence(gpus: list[Gpu], holders: list[tuple[Gpu, GpuProcess]]) -> dict[str, Any]:
    return {
        "gpus": [{"index": g.index, "free_gib": g.memory.free_gib, "total_gib": g.memory.total_gib} for g in gpus],
        "processes": [{"gpu": g.index, **p.model_dump(exclude_none=True)} for g, p in holders],
    }


def _remedy(holders: list[tuple[Gpu, GpuProcess]]) -> str:
    if not holders:
        return f"Find what holds the memory with `{FIND_GPU_PROCS}`."
    kill = " ".join(str(p.pid) for _, p in holders)
    return (
        f"Stop {'them' if len(holders) > 1 else 'it'} if it is a leftover (`kill {kill}`; firstlight never "
        f"kills a process it did not start), or choose other GPUs with CUDA_VISIBLE_DEVICES. All holders: "
        f"`{FIND_GPU_PROCS}`."
    )


def check_parallelism(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    config = facts.model.config if facts.model else None
    par = dep.parallel
    out = []
    heads = config.num_attention_heads if config else None
    kv = config.num_key_value_heads if config else None
    if heads and heads % par.tp:
        out.append(
            fail(
                "parallelism",
                f"TP {par.tp} does not divide the {heads} attention heads",
                f"Choose a TP size that divides {heads}.",
                heads=heads,
                tp=par.tp,
            )
        )
    if config and kv and config.attention != "MLA" and kv % par.tp and par.tp % kv:
        out.append(
            fail(
                "parallelism",
                f"TP {par.tp} and the {kv} KV heads: neither divides the other",
                f"Choose a TP size that divides {kv} or is a multiple of it.",
                kv_heads=kv,
                tp=par.tp,
            )
        )
    experts = config.experts if config else None
    if par.ep > 1 and experts and experts % par.ep:
        out.append(
            fail(
                "parallelism",
                f"EP {par.ep} does not divide the {experts} experts",
                f"Choose an EP size that divides {experts}.",
                experts=experts,
                ep=par.ep,
            )
        )
    if facts.gpus.gpus:
        out += _gpu_count_and_kind(facts, dep)
    if not out:
        out.append(ok("parallelism", f"tp={par.tp} pp={par.pp} dp={par.dp} ep={par.ep} fits the model and GPUs"))
    return out


def _gpu_count_and_kind(facts: Facts, dep: Deployment) -> list[Finding]:
    out = []
    par = dep.parallel
    candidates = available_gpus(facts, dep)
    if par.gpus_per_node > len(candidates):
        out.append(
            fail(
                "parallelism",
                f"TP x PP x DP = {par.world_size} GPUs, but {len(candidates)} are available to this launch",
                "Lower tp/pp/dp to the GPUs you have, or make more visible.",
                world_size=par.world_size,
                gpus=len(candidates),
            )
        )
    names = {g.name for g in used_gpus(facts, dep)}
    if len(names) > 1:
        out.append(
            warn(
                "parallelism",
                f"the launch spans different GPU models: {', '.join(sorted(names))}",
                "Use GPUs of one kind (CUDA_VISIBLE_DEVICES): the slowest sets the pace.",
                names=sorted(names),
            )
        )
    return out
