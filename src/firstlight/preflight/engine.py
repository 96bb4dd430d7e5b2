"""The engine's own environment: it is installed, knows the spec's flags, and has a backend for this GPU."""

from __future__ import annotations

from pathlib import Path

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.engines.base import extra_args
from firstlight.facts import Facts, SoftwareFacts
from firstlight.preflight.finding import Finding, fail, ok, used_gpus, version_tuple, warn

MIN_FLAGS_KNOWN = 100  # fewer flags found in the engine's source means the lookup failed: do not judge


def check_engine_environment(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    sw = facts.software or SoftwareFacts(interpreter=str(dep.python or dep.program))
    if sw.error:
        where = (
            "Set `program:` in the spec to the engine's binary (e.g. /opt/llama.cpp/build/bin/llama-server)."
            if engine.runs_with == "program"
            else "Set `python:` in the spec to the interpreter of the environment where the engine is installed "
            "(e.g. /opt/venv/bin/python)."
        )
        return [fail("engine_env", sw.error, where, interpreter=sw.interpreter)]
    version = sw.version_of(engine)
    if engine.software.distributions and not version:
        return [
            fail(
                "engine_env",
                f"{engine.name} is not installed for {sw.interpreter}",
                f"Install {engine.name} into that environment, or point `python:` at the one that has it.",
            )
        ]
    found = sw.entrypoint
    if found is not None and not found.ok:
        what = (
            f"it cannot import {found.missing_module}"
            if found.missing_module
            else f"importing it failed: {found.error}"
        )
        remedy = (
            f"pip install {found.package} into that environment (the engine needs it to start), or reinstall "
            f"{engine.name} with its dependencies."
            if found.package
            else f"Reinstall {engine.name} into that environment; the error above is what its import says."
        )
        return [
            fail(
                "engine_env",
                f"{engine.name} {version} is installed but will not start: {what} ({', '.join(found.modules)})",
                remedy,
                **found.model_dump(),
            )
        ]
    out = [
        ok(
            "engine_env",
            f"{engine.name} {version}"
            + (f", torch {sw.packages.get('torch')}" if engine.runs_with == "python" else "")
            + (f" (CUDA {sw.torch_cuda})" if sw.torch_cuda else ""),
            packages=sw.packages,
        )
    ]
    if sw.torch_cuda and not facts.gpus.gpus:
        out.append(
            fail(
                "gpu_visible",
                "the engine's torch is a CUDA build, but no GPU is visible here "
                f"({facts.gpus.error or 'NVML found none'})",
                "Check `nvidia-smi`, CUDA_VISIBLE_DEVICES and the container's GPU runtime (--gpus all).",
            )
        )
    return out


def check_engine_flags(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    sw = facts.software
    known = sw.flags_of(engine) if sw else set()
    version = sw.version_of(engine) if sw else None
    deprecated = engine.software.deprecated_flags
    out = []
    speculative = engine.speculative_flags(dep.speculative) if dep.speculative else []
    for name in [*dep.arg_names(), *speculative]:
        if name in deprecated and version_tuple(version) >= version_tuple(deprecated[name][0]):
            since, instead = deprecated[name]
            out.append(
                warn("engine_flags", f"{name} is deprecated since {engine.name} {since}", f"Use {instead}.", flag=name)
            )
        elif len(known) >= MIN_FLAGS_KNOWN and name not in known:
            out.append(
                fail(
                    "engine_flags",
                    f"{name} is not a flag of {engine.name} {version}",
                    f"Remove or rename it (see `{engine.name} --help` for this version); flags are renamed "
                    "between releases.",
                    flag=name,
                )
            )
    if not out:
        out.append(
            ok(
                "engine_flags",
                f"{len(dep.arg_names()) + len(speculative)} extra flag(s) known to {engine.name} {version}"
                if len(known) >= MIN_FLAGS_KNOWN
                else "engine flags not checked (flag list unavailable)",
            )
        )
    return out


def check_engine_variables(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    """The environment variables the engine needs for the flags the spec gives it (in the spec, so that a
    rendered unit or a systemd launch has them too, not only a shell that exported them)."""
    out = []
    for rule in engine.required_env:
        if str(dep.arg(rule.flag)).lower() != rule.value:
            continue
        have = dep.env.get(rule.variable, engine.default_env.get(rule.variable))
        if have is not None and str(have) == rule.setting:
            out.append(ok("engine_variables", f"{rule.variable}={rule.setting} for --{rule.flag} {rule.value}"))
            continue
        out.append(
            fail(
                "engine_variables",
                f"--{rule.flag} {rule.value} needs {rule.variable}={rule.setting}"
                + (f", the spec sets {have!r}" if have is not None else ", the spec does not set it"),
                f'Add `{rule.variable}: "{rule.setting}"` to the spec\'s env: {rule.why}.',
                variable=rule.variable,
            )
        )
    return out


def check_attention_backend(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    kind = facts.model.config.attention if facts.model and facts.model.config else "MHA"
    gpus = used_gpus(facts, dep)
    major = gpus[0].sm_major if gpus else None
    if major is None:
        return [ok("attention_backend", "no GPU: attention backends not checked")]
    backends = engine.attention
    if backends is None:
        return [ok("attention_backend", f"{engine.name} chooses its own attention kernels")]
    ladder = backends.ladder(major, kind)
    cc = gpus[0].compute_capability
    chosen = [(f, str(dep.arg(f))) for f in backends.flags if dep.arg(f)]
    if backends.env and dep.env.get(backends.env):
        chosen.append((backends.env, dep.env[backends.env]))
    if not chosen:
        return [
            ok(
                "attention_backend",
                f"no backend set: {engine.name} picks its default for SM{cc} {kind}; "
                f"ladder if it fails: {' → '.join(ladder)}",
                ladder=ladder,
                sm=cc,
                attention=kind,
            )
        ]
    out = []
    version = facts.software.version_of(engine) if facts.software else None
    for flag, name in chosen:
        removed = backends.removed.get(name)
        limits = backends.limits(name)
        if removed and version_tuple(version) >= version_tuple(removed):
            out.append(
                fail(
                    "attention_backend",
                    f"{name} was removed in {engine.name} {removed} (installed: {version})",
                    f"Use {flag} {ladder[0]}; ladder: {' → '.join(ladder)}.",
                    ladder=ladder,
                )
            )
        elif limits is None:
            out.append(
                warn(
                    "attention_backend",
                    f"{flag} {name}: not in firstlight's table for SM{cc} {kind}",
                    f"If it fails, try in order: {' → '.join(ladder)}.",
                    ladder=ladder,
                )
            )
        elif (allowed := limits.get(kind)) is not None and major not in allowed:
            where = "no architecture" if not allowed else "SM" + "/SM".join(f"{a}x" for a in sorted(allowed))
            out.append(
                fail(
                    "attention_backend",
                    f"{flag} {name} does not run {kind} attention on SM{cc} "
                    f"({gpus[0].name}); it runs {kind} on {where}",
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


def check_speculative(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    """The engine-neutral `speculative:` is a method the installed engine knows, with a draft model that is
    there (a local path)."""
    spec = dep.speculative
    if spec is None:
        return []
    sw = facts.software
    method = engine.speculative_method(spec.method)
    known = sw.speculative_methods_of(engine) if sw else set()
    version = sw.version_of(engine) if sw else None
    out = []
    if known and method not in known:
        out.append(
            fail(
                "speculative",
                f"{engine.name} {version} does not know speculative method {method}",
                f"It knows: {', '.join(sorted(known))}. Upgrade {engine.name}, or choose one of these.",
                method=method,
            )
        )
    if spec.draft and spec.draft.startswith("/") and not Path(spec.draft).is_dir():
        out.append(
            fail(
                "speculative",
                f"the draft model {spec.draft} is not a directory here",
                "Point speculative.draft at the draft model's directory (config.json and weights).",
            )
        )
    if not out:
        flags = " ".join(extra_args(engine.speculative_options(spec)))
        where = f"known to {engine.name} {version}" if known else "method list of the installed engine unavailable"
        out.append(ok("speculative", f"{spec.method} → {flags} ({where})"))
    return out
