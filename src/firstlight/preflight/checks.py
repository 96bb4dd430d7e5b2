"""The preflight checks: pure functions from (facts, deployment) to findings. Nothing here touches the host."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from firstlight.deployment import Deployment
from firstlight.preflight.finding import Finding, arg, arg_names, fail, ok, version_tuple, warn
from firstlight.preflight.memory import check_memory_fit, memory_fraction
from firstlight.preflight.tables import (
    COMPRESSION_FORMAT_SINCE,
    DEPRECATED_FLAGS,
    KNOWN_QUANT_METHODS,
    SGLANG_BACKENDS,
    SGLANG_REMOVED_BACKENDS,
    VLLM_BACKENDS,
    backend_ladder,
)

Facts = dict[str, Any]
FIND_GPU_PROCS = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
MIN_FLAGS_KNOWN = 100  # fewer flags found in the engine's source means the lookup failed: do not judge


def used_gpus(facts: Facts, dep: Deployment) -> list[dict[str, Any]]:
    """The GPUs the launch will use: CUDA_VISIBLE_DEVICES from the spec, else the first tp*pp*dp."""
    gpus = (facts.get("gpus") or {}).get("gpus") or []
    visible = dep.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v.strip() for v in visible.split(",") if v.strip()]
        chosen = [g for w in wanted for g in gpus if str(g["index"]) == w or g.get("uuid") == w]
    else:
        chosen = gpus
    return chosen[: dep.parallel.gpus_per_node]


def sm_major(gpus: list[dict[str, Any]]) -> int | None:
    ccs = [g.get("compute_capability") for g in gpus if g.get("compute_capability")]
    return int(str(ccs[0]).split(".")[0]) if ccs else None


# ---------------------------------------------------------------- model files


def check_model_files(facts: Facts, dep: Deployment) -> list[Finding]:
    model = facts.get("model") or {}
    path = model.get("path", str(dep.model))
    if not model.get("exists"):
        return [
            fail(
                "model_files",
                f"the model directory {path} does not exist",
                "Fix `model:` in the spec (relative paths are relative to the spec file), or mount the "
                "directory where the engine runs.",
                path=path,
            )
        ]
    out = []
    if not model.get("config_present"):
        out.append(
            fail(
                "model_files",
                f"{path} has no config.json",
                "Point `model:` at the directory that holds "
                "config.json and the weights (a Hugging Face snapshot's directory).",
                path=path,
            )
        )
    elif model.get("config_error"):
        out.append(fail("model_files", model["config_error"], "Restore config.json from the source.", path=path))
    weights = model.get("weights") or {}
    corrupt = weights.get("corrupt_shards") or []
    if corrupt:
        errors = {s["file"]: s["error"] for s in model.get("shards", []) if "error" in s}
        out.append(
            fail(
                "model_files",
                f"{len(corrupt)} safetensors shard(s) have a truncated or corrupt header: {', '.join(corrupt[:5])}",
                "Download or copy these shards again and compare their sizes with the source.",
                errors=errors,
            )
        )
    if not model.get("shards") and not model.get("other_weights"):
        out.append(
            fail(
                "model_files",
                f"{path} holds no weights (*.safetensors, *.bin, *.gguf)",
                "Download the weights into the model directory.",
                path=path,
            )
        )
    if not model.get("tokenizer_files"):
        out.append(
            warn(
                "model_files",
                f"{path} has no tokenizer files",
                "Copy tokenizer.json / tokenizer_config.json next to the weights, or pass --tokenizer.",
                path=path,
            )
        )
    if not out:
        w = weights
        out.append(
            ok(
                "model_files",
                f"config.json, {len(model.get('shards', []))} shard(s) with "
                f"{w.get('params', 0) / 1e9:.3g} B parameters ({w.get('bytes', 0) / 1024**3:.2f} GiB), tokenizer",
                params_by_dtype=w.get("params_by_dtype"),
                bytes_by_dtype=w.get("bytes_by_dtype"),
            )
        )
    return out


# ---------------------------------------------------------------- engine environment


def check_engine_environment(facts: Facts, dep: Deployment) -> list[Finding]:
    sw = facts.get("software") or {}
    if sw.get("error"):
        return [
            fail(
                "engine_env",
                sw["error"],
                "Set `python:` in the spec to the interpreter of the environment "
                "where the engine is installed (e.g. /opt/venv/bin/python).",
                interpreter=sw.get("interpreter"),
            )
        ]
    packages = sw.get("packages") or {}
    if dep.engine in ("vllm", "sglang", "transformers") and not packages.get(dep.engine):
        return [
            fail(
                "engine_env",
                f"{dep.engine} is not installed for {sw.get('interpreter')}",
                f"Install {dep.engine} into that environment, or point `python:` at the one that has it.",
            )
        ]
    out = [
        ok(
            "engine_env",
            f"{dep.engine} {packages.get(dep.engine)}, torch {packages.get('torch')}"
            + (f" (CUDA {sw['torch_cuda']})" if sw.get("torch_cuda") else ""),
            packages=packages,
        )
    ]
    gpus = (facts.get("gpus") or {}).get("gpus") or []
    if sw.get("torch_cuda") and not gpus:
        out.append(
            fail(
                "gpu_visible",
                "the engine's torch is a CUDA build, but no GPU is visible here "
                f"({(facts.get('gpus') or {}).get('error') or 'NVML found none'})",
                "Check `nvidia-smi`, CUDA_VISIBLE_DEVICES and the container's GPU runtime (--gpus all).",
            )
        )
    return out


def check_engine_flags(facts: Facts, dep: Deployment) -> list[Finding]:
    sw = facts.get("software") or {}
    flags = sw.get("engine_flags")
    known = set(flags.get(dep.engine, [])) if isinstance(flags, dict) else set()  # the flags of each engine
    version = (sw.get("packages") or {}).get(dep.engine)
    out = []
    deprecated = DEPRECATED_FLAGS.get(dep.engine, {})
    for name in arg_names(dep):
        if name in deprecated and version_tuple(version) >= version_tuple(deprecated[name][0]):
            since, instead = deprecated[name]
            out.append(
                warn("engine_flags", f"{name} is deprecated since {dep.engine} {since}", f"Use {instead}.", flag=name)
            )
        elif len(known) >= MIN_FLAGS_KNOWN and name not in known:
            out.append(
                fail(
                    "engine_flags",
                    f"{name} is not a flag of {dep.engine} {version}",
                    f"Remove or rename it (see `{dep.engine} --help` for this version); flags are renamed "
                    "between releases.",
                    flag=name,
                )
            )
    if not out:
        out.append(
            ok(
                "engine_flags",
                f"{len(arg_names(dep))} extra flag(s) known to {dep.engine} {version}"
                if len(known) >= MIN_FLAGS_KNOWN
                else "engine flags not checked (flag list unavailable)",
            )
        )
    return out


# ---------------------------------------------------------------- GPUs


def check_gpu_processes(facts: Facts, dep: Deployment) -> list[Finding]:
    gpus = used_gpus(facts, dep)
    if not gpus:
        return [ok("gpu_processes", "no GPU in use by this launch")]
    fraction = memory_fraction(dep)
    holders = [(g, p) for g in gpus for p in g.get("processes", []) if p.get("used_gib", 0) > 0]
    free = [g["memory"]["free_gib"] for g in gpus]
    evidence = {
        "gpus": [
            {"index": g["index"], "free_gib": g["memory"]["free_gib"], "total_gib": g["memory"]["total_gib"]}
            for g in gpus
        ],
        "processes": [{"gpu": g["index"], **p} for g, p in holders],
    }
    who = "; ".join(
        f"pid {p['pid']} ({p.get('cmdline') or p.get('name') or 'unknown'}) holds "
        f"{p['used_gib']:.1f} GiB on GPU {g['index']}"
        for g, p in holders
    )
    kill = " ".join(str(p["pid"]) for _, p in holders)
    remedy = (
        (
            f"Stop {'them' if len(holders) > 1 else 'it'} if it is a leftover (`kill {kill}`; firstlight never "
            f"kills a process it did not start), or choose other GPUs with CUDA_VISIBLE_DEVICES. All holders: "
            f"`{FIND_GPU_PROCS}`."
        )
        if holders
        else f"Find what holds the memory with `{FIND_GPU_PROCS}`."
    )
    if dep.engine == "sglang" and dep.parallel.tp > 1 and min(free) < 0.9 * max(free):
        return [
            fail(
                "gpu_processes",
                f"free memory differs across the TP GPUs ({min(free):.1f} vs {max(free):.1f} "
                f"GiB): SGLang aborts with 'The memory capacity is unbalanced'. {who}",
                remedy,
                **evidence,
            )
        ]
    short = [g for g in gpus if g["memory"]["free_gib"] < fraction * g["memory"]["total_gib"]]
    if short:
        g = short[0]
        want = fraction * g["memory"]["total_gib"]
        cause = who or f"{g['memory']['used_gib']:.1f} GiB is in use by processes not visible here"
        return [
            fail(
                "gpu_processes",
                f"GPU {g['index']} has {g['memory']['free_gib']:.1f} of "
                f"{g['memory']['total_gib']:.1f} GiB free, less than the {want:.1f} GiB the launch claims "
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
    return [ok("gpu_processes", f"no other process on GPU(s) {', '.join(str(g['index']) for g in gpus)}", **evidence)]


def check_parallelism(facts: Facts, dep: Deployment) -> list[Finding]:
    config = (facts.get("model") or {}).get("config") or {}
    par = dep.parallel
    out = []
    heads = config.get("num_attention_heads")
    kv = config.get("num_key_value_heads")
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
    if kv and config.get("attention") != "MLA" and kv % par.tp and par.tp % kv:
        out.append(
            fail(
                "parallelism",
                f"TP {par.tp} and the {kv} KV heads: neither divides the other",
                f"Choose a TP size that divides {kv} or is a multiple of it.",
                kv_heads=kv,
                tp=par.tp,
            )
        )
    experts = config.get("experts")
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
    gpus = (facts.get("gpus") or {}).get("gpus") or []
    if gpus:
        candidates = gpus
        if dep.env.get("CUDA_VISIBLE_DEVICES") is not None:
            candidates = [g for g in gpus if str(g["index"]) in dep.env["CUDA_VISIBLE_DEVICES"].split(",")]
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
        names = {g["name"] for g in used_gpus(facts, dep)}
        if len(names) > 1:
            out.append(
                warn(
                    "parallelism",
                    f"the launch spans different GPU models: {', '.join(sorted(names))}",
                    "Use GPUs of one kind (CUDA_VISIBLE_DEVICES): the slowest sets the pace.",
                    names=sorted(names),
                )
            )
    if not out:
        out.append(ok("parallelism", f"tp={par.tp} pp={par.pp} dp={par.dp} ep={par.ep} fits the model and GPUs"))
    return out


# ---------------------------------------------------------------- quantization and kernels


def check_quantization(facts: Facts, dep: Deployment) -> list[Finding]:
    quant = ((facts.get("model") or {}).get("config") or {}).get("quantization")
    if not quant:
        return [ok("quantization", "the checkpoint is not quantized")]
    method = quant.get("method")
    sw = facts.get("software") or {}
    out = []
    if method == "compressed-tensors":
        installed = (sw.get("packages") or {}).get("compressed-tensors")
        formats = set(sw.get("compression_formats") or [])
        for fmt in quant.get("formats", []):
            since = COMPRESSION_FORMAT_SINCE.get(fmt)
            known = (
                fmt in formats
                if formats
                else (since is not None and installed is not None and version_tuple(installed) >= version_tuple(since))
            )
            if not installed:
                out.append(
                    fail(
                        "quantization",
                        f"the checkpoint uses compressed-tensors format {fmt}, but "
                        "compressed-tensors is not installed in the engine's environment",
                        f"pip install 'compressed-tensors>={since or 'latest'}' into the engine's environment.",
                        format=fmt,
                    )
                )
            elif not known:
                need = f">= {since}" if since else "a newer release"
                out.append(
                    fail(
                        "quantization",
                        f"compressed-tensors {installed} does not know the checkpoint's "
                        f"format {fmt} (first in {since or 'a later release'})",
                        f"Upgrade compressed-tensors to {need} in the engine's environment (within what "
                        f"{dep.engine} pins), e.g. pip install 'compressed-tensors{need.replace(' ', '')}'.",
                        format=fmt,
                        installed=installed,
                        first_release=since,
                    )
                )
    elif method and method not in KNOWN_QUANT_METHODS:
        out.append(
            warn(
                "quantization",
                f"quantization method {method} is not one firstlight knows engines support",
                f"Check that {dep.engine} supports {method} (--quantization).",
                method=method,
            )
        )
    if not out:
        out.append(
            ok("quantization", f"{method} {', '.join(quant.get('formats') or [])} is supported".strip(), **quant)
        )
    return out


def check_attention_backend(facts: Facts, dep: Deployment) -> list[Finding]:
    config = (facts.get("model") or {}).get("config") or {}
    kind = config.get("attention") or "MHA"
    gpus = used_gpus(facts, dep)
    major = sm_major(gpus)
    if major is None:
        return [ok("attention_backend", "no GPU: attention backends not checked")]
    ladder = backend_ladder(dep.engine, major, kind)
    if dep.engine == "sglang":
        table = SGLANG_BACKENDS
        chosen = [
            (f, arg(dep, f))
            for f in ("attention-backend", "prefill-attention-backend", "decode-attention-backend")
            if arg(dep, f)
        ]
    elif dep.engine == "vllm":
        table = VLLM_BACKENDS
        chosen = [(f, arg(dep, f)) for f in ("attention-backend",) if arg(dep, f)]
        if dep.env.get("VLLM_ATTENTION_BACKEND"):
            chosen.append(("VLLM_ATTENTION_BACKEND", dep.env["VLLM_ATTENTION_BACKEND"]))
    else:
        return [ok("attention_backend", f"{dep.engine} chooses its own attention kernels")]
    cc = gpus[0].get("compute_capability")
    if not chosen:
        return [
            ok(
                "attention_backend",
                f"no backend set: {dep.engine} picks its default for SM{cc} {kind}; "
                f"ladder if it fails: {' → '.join(ladder)}",
                ladder=ladder,
                sm=cc,
                attention=kind,
            )
        ]
    out = []
    version = ((facts.get("software") or {}).get("packages") or {}).get(dep.engine)
    for flag, backend in chosen:
        name = str(backend)
        limits = table.get(name) or table.get(name.lower()) or table.get(name.upper())
        removed = SGLANG_REMOVED_BACKENDS.get(name) if dep.engine == "sglang" else None
        if removed and version_tuple(version) >= version_tuple(removed):
            out.append(
                fail(
                    "attention_backend",
                    f"{name} was removed in {dep.engine} {removed} (installed: {version})",
                    f"Use {flag} {ladder[0]}; ladder: {' → '.join(ladder)}.",
                    ladder=ladder,
                )
            )
            continue
        if limits is None:
            out.append(
                warn(
                    "attention_backend",
                    f"{flag} {name}: not in firstlight's table for SM{cc} {kind}",
                    f"If it fails, try in order: {' → '.join(ladder)}.",
                    ladder=ladder,
                )
            )
            continue
        allowed = limits.get(kind)
        if allowed is not None and major not in allowed:
            where = "no architecture" if not allowed else "SM" + "/SM".join(f"{a}x" for a in sorted(allowed))
            out.append(
                fail(
                    "attention_backend",
                    f"{flag} {name} does not run {kind} attention on SM{cc} "
                    f"({gpus[0]['name']}); it runs {kind} on {where}",
                    f"Set {flag} {ladder[0]}; try in order: {' → '.join(ladder)}.",
                    backend=name,
                    sm=cc,
                    attention=kind,
                    ladder=ladder,
                )
            )
        else:
            out.append(ok("attention_backend", f"{flag} {name} runs {kind} on SM{cc}", ladder=ladder))
    return out


# ---------------------------------------------------------------- host


def check_host(facts: Facts, dep: Deployment) -> list[Finding]:
    host = facts.get("host") or {}
    out = []
    port = host.get("port") or {}
    if port and not port.get("free"):
        holder = port.get("holder")
        who = f" by pid {holder['pid']} ({holder.get('cmdline') or holder.get('name')})" if holder else ""
        out.append(
            fail(
                "port",
                f"port {dep.port} on {dep.host} is in use{who}",
                f"Stop that process, or set another `port:` in the spec. Find the holder: `ss -ltnp | grep "
                f":{dep.port}`.",
                **port,
            )
        )
    elif port:
        out.append(ok("port", f"port {dep.port} on {dep.host} is free"))
    if dep.host in ("0.0.0.0", "::", "") and not (arg(dep, "api-key") or dep.env.get("VLLM_API_KEY")):
        out.append(
            warn(
                "bind",
                f"the server binds {dep.host or 'all interfaces'} without an API key",
                "Bind 127.0.0.1, or set an API key (--api-key, from an environment file, not the spec).",
            )
        )
    disk = host.get("disk_free_gib") or {}
    if disk and disk.get("free", 1e9) < 20:
        out.append(
            warn(
                "disk",
                f"{disk['free']:.1f} GiB free at {disk['path']}",
                "Engines write compile and kernel caches next to the model and in ~/.cache; free some space.",
                **disk,
            )
        )
    shm = host.get("shm_gib") or {}
    world = dep.parallel.tp * dep.parallel.pp
    if world > 1 and shm and shm.get("total", 1e9) < 1:
        out.append(
            fail(
                "shm",
                f"/dev/shm is {shm['total'] * 1024:.0f} MiB; NCCL needs more for {world} ranks",
                "Give the container more shared memory (docker --shm-size=16g or --ipc=host; on Kubernetes an "
                "emptyDir with medium: Memory at /dev/shm).",
                **shm,
            )
        )
    nofile = host.get("nofile_soft")
    if nofile is not None and nofile < 65536:
        out.append(
            warn(
                "open_files",
                f"the open-files limit is {nofile}; high concurrency can hit 'Too many open files'",
                "Raise it (ulimit -n 65536, LimitNOFILE= in a systemd unit).",
                nofile=nofile,
            )
        )
    if not out:
        out.append(ok("host", "port, disk, /dev/shm and limits are fine"))
    return out


CHECKS: tuple[Callable[[Facts, Deployment], list[Finding]], ...] = (
    check_model_files,
    check_engine_environment,
    check_engine_flags,
    check_gpu_processes,
    check_parallelism,
    check_quantization,
    check_attention_backend,
    check_host,
)


def run_checks(facts: Facts, dep: Deployment) -> list[Finding]:
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(facts, dep))
    findings.append(check_memory_fit(facts, dep, used_gpus(facts, dep)))
    return findings
