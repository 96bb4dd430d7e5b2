"""The Deployment spec: what to run, loaded from YAML and validated with errors that say how to fix them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from firstlight.engines import get_engine, launchable
from firstlight.errors import SpecError

ArgValue = str | int | float | bool | list[Any] | dict[str, Any] | None

# Example values quoted in error messages, so a user sees a right value next to the wrong one.
EXAMPLES: dict[str, str] = {
    "engine": f"engine: vllm   # one of {', '.join(launchable())}",
    "python": "python: ../.venv-engine/bin/python   # the engine's own interpreter",
    "program": "program: /opt/llama.cpp/build/bin/llama-server   # the engine's binary (llama.cpp)",
    "model": "model: ../models/tiny-llama   # a local model directory",
    "served_model_name": "served_model_name: tiny-llama",
    "host": "host: 127.0.0.1",
    "port": "port: 8000   # 1-65535",
    "parallel": "parallel: {tp: 8, pp: 1, dp: 1, ep: 1, nodes: 1}",
    "args": "args: {max-model-len: 2048, enforce-eager: true}",
    "env": 'env: {VLLM_CPU_KVCACHE_SPACE: "1"}',
    "supervisor": "supervisor: embedded",
    "stall": "stall: {weights_loading: 1800, process_start: 300}   # seconds without progress per phase",
    "log_dir": "log_dir: ~/.firstlight/logs",
    "name": "name: tiny-vllm-cpu",
    "probe_timeout": "probe_timeout: 30",
    "speculative": "speculative: {method: eagle3, draft: /models/k26-eagle3, tokens: 3}   # or {method: ngram, ...}",
}

# Seconds a phase may go without a progress event before the launch counts as stalled. A 600 GB
# model loads for many minutes while printing shard progress; a hang prints nothing.
DEFAULT_STALL_S: dict[str, float] = {
    "process_start": 300,
    "distributed_init": 600,
    "weights_loading": 1200,
    "weights_loaded": 900,
    "torch_compile": 1200,  # Dynamo and Inductor print little until they finish
    "kv_cache_allocated": 900,
    "cuda_graph_capture": 1200,
    "cuda_graph_done": 600,
    "http_listening": 300,
    "warmup_done": 300,
}


class Parallel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    nodes: int = Field(1, ge=1, description="hosts the ranks span (multi-node: render lws or slurm)")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def gpus_per_node(self) -> int:
        return max(1, self.world_size // self.nodes)


# Methods of the engine-neutral form; the draft model they need (mtp drafts with the model's own layers).
SPEC_METHODS = ("eagle3", "eagle", "mtp", "ngram", "dflash", "draft_model")
NEEDS_DRAFT = frozenset({"eagle3", "eagle", "dflash", "draft_model"})


class Speculative(BaseModel):
    """Speculative decoding, said once for every engine; each adapter turns it into its own flags."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["eagle3", "eagle", "mtp", "ngram", "dflash", "draft_model"]
    draft: str | None = Field(None, description="the draft model: a local directory or a hub id")
    tokens: int = Field(ge=1, description="tokens drafted per step (a DFlash block's size)")
    topk: int = Field(1, ge=1, description="EAGLE tree width per step; 1 drafts a chain")
    verify: int | None = Field(None, ge=1, description="tokens verified per step in a tree (default tokens+1)")
    lookup_min: int | None = Field(None, ge=1, description="n-gram: the shortest match looked up")
    lookup_max: int | None = Field(None, ge=1, description="n-gram: the longest match looked up")

    @model_validator(mode="after")
    def _coherent(self) -> Speculative:
        if self.method in NEEDS_DRAFT and not self.draft:
            raise ValueError(f"method {self.method} drafts with a model of its own: give draft (a path)")
        if self.method == "ngram" and self.draft:
            raise ValueError("method ngram drafts from the prompt: remove draft")
        if self.method != "ngram" and (self.lookup_min or self.lookup_max):
            raise ValueError("lookup_min and lookup_max are for method ngram")
        if self.lookup_min and self.lookup_max and self.lookup_min > self.lookup_max:
            raise ValueError("lookup_min must not exceed lookup_max")
        return self


class Deployment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("", description="a short name; defaults to the served model name")
    engine: str
    python: Path | None = Field(
        None, validate_default=True, description="the engine's interpreter; engines live in their own environment"
    )
    program: Path | None = Field(
        None, validate_default=True, description="the engine's binary, for engines that are not Python"
    )
    model: Path
    served_model_name: str = ""
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    parallel: Parallel = Field(default_factory=Parallel)
    args: dict[str, ArgValue] | list[str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    supervisor: Literal["embedded", "systemd"] = "embedded"
    stall: dict[str, float] = Field(default_factory=dict)
    log_dir: Path = Path("~/.firstlight/logs")
    probe_timeout: float = Field(60.0, gt=0, description="seconds for the one-token readiness generation")
    speculative: Speculative | None = Field(None, description="speculative decoding, engine-neutral")

    @field_validator("engine")
    @classmethod
    def _launchable(cls, value: str) -> str:
        if value not in launchable():
            raise ValueError(f"unknown engine {value!r}; one of {', '.join(launchable())}")
        return value

    @field_validator("python", "program")
    @classmethod
    def _what_the_engine_runs_with(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        engine = info.data.get("engine")
        if engine is None:
            return value
        runs_with = get_engine(engine).runs_with
        if value is None and runs_with == info.field_name:
            raise ValueError(f"required field is missing ({engine} runs with its own {info.field_name})")
        if value is not None and runs_with != info.field_name:
            raise ValueError(f"{engine} runs with its {runs_with}, not a {info.field_name}: remove this field")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): _env_value(v) for k, v in value.items()}
        return value

    @field_validator("stall")
    @classmethod
    def _known_phases(cls, value: dict[str, float]) -> dict[str, float]:
        for phase, seconds in value.items():
            if phase not in DEFAULT_STALL_S:
                raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(DEFAULT_STALL_S)}")
            if seconds <= 0:
                raise ValueError(f"{phase}: the allowance must be positive seconds")
        return value

    @field_validator("served_model_name")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if re.search(r"\s", value):
            raise ValueError("must not contain whitespace")
        return value

    @model_validator(mode="after")
    def _defaults(self) -> Deployment:
        if not self.served_model_name:
            self.served_model_name = self.model.name
        if not self.name:
            self.name = self.served_model_name
        return self

    @model_validator(mode="after")
    def _speculative_flags(self) -> Deployment:
        if self.speculative is None:
            return self
        flags = get_engine(self.engine).speculative_flags(self.speculative)  # ValueError: not for this engine
        both = sorted(set(flags) & set(self.arg_names()))
        if both:
            raise ValueError(f"args sets {', '.join(both)} too: say speculative decoding once, in one form")
        return self

    def stall_allowance(self, phase: str) -> float | None:
        if phase not in DEFAULT_STALL_S:
            return None
        return self.stall.get(phase, DEFAULT_STALL_S[phase])

    def arg(self, name: str) -> Any:
        """The value of engine flag `name` in `args` (mapping or list form): True for a bare flag, else None."""
        if isinstance(self.args, dict):
            for key, value in self.args.items():
                if key.lstrip("-") == name:
                    return value
            return None
        args = list(self.args)
        for i, a in enumerate(args):
            if a == f"--{name}":
                return args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
            if a.startswith(f"--{name}="):
                return a.split("=", 1)[1]
        return None

    def arg_names(self) -> list[str]:
        """The long flags in `args`, as `--name`."""
        if isinstance(self.args, dict):
            return [k if k.startswith("-") else f"--{k}" for k in self.args]
        return [a.split("=", 1)[0] for a in self.args if a.startswith("--")]

    def with_args(self, flags: dict[str, Any]) -> Deployment:
        """The same launch with these engine flags set (replacing the same flags in `args`, mapping or list)."""
        if isinstance(self.args, dict):
            args: dict[str, Any] | list[str] = {
                **{k: v for k, v in self.args.items() if k.lstrip("-") not in flags},
                **flags,
            }
        else:
            args = _without(list(self.args), flags) + [part for f, v in flags.items() for part in (f"--{f}", str(v))]
        return self.model_copy(update={"args": args})

    def with_supervisor(self, supervisor: str) -> Deployment:
        """The same launch under another supervisor (embedded or systemd)."""
        if supervisor not in ("embedded", "systemd"):
            raise SpecError(f"supervisor {supervisor!r}: one of embedded, systemd")
        return self.model_copy(update={"supervisor": supervisor})

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def resolved(self, base: Path) -> Deployment:
        """Paths in a spec file are relative to the file, so a spec works from any directory."""
        update: dict[str, Any] = {}
        spec = self.speculative
        if spec is not None and spec.draft and spec.draft.startswith((".", "/", "~")):
            draft = Path(spec.draft).expanduser()
            update["speculative"] = spec.model_copy(update={"draft": os.path.normpath(base / draft)})
        for field in ("python", "program", "model", "log_dir"):
            if getattr(self, field) is None:
                continue
            path = Path(str(getattr(self, field))).expanduser()
            # a bare command name (python3, llama-server) is looked up on PATH, not next to the spec
            if not path.is_absolute() and (field not in ("python", "program") or "/" in str(path)):
                # normpath, not resolve(): a venv's python is a symlink that must stay one
                path = Path(os.path.normpath(base / path))
            update[field] = path
        return self.model_copy(update=update)


def _without(args: list[str], flags: dict[str, Any]) -> list[str]:
    """A list of engine arguments without these flags (and their values)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0].lstrip("-")
        if arg.startswith("--") and name in flags:
            skip = "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("--")
            continue
        out.append(arg)
    return out


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def format_validation_error(
    err: ValidationError,
    source: str,
    what: str = "spec",
    examples: dict[str, str] | None = None,
    fields: Iterable[str] | None = None,
) -> str:
    """Pydantic's errors as lines that name the field, say what is wrong in our words, and show a right
    value (`examples`, by top-level field); an unknown field lists the known ones."""
    examples = EXAMPLES if examples is None else examples
    known = ", ".join(fields if fields is not None else Deployment.model_fields)
    lines = [f"{source}: the {what} is not valid"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown field; known fields: {known}"
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "value_error":
            msg = str(e["ctx"]["error"])  # our validators' own words, without pydantic's "Value error, "
        top = str(e["loc"][0]) if e["loc"] else ""
        example = examples.get(top, "")
        lines.append(f"  {loc}: {msg}" + (f"\n      e.g. {example}" if example else ""))
    return "\n".join(lines)


def load_deployment(path: Path | str) -> Deployment:
    """Load and validate a spec file; raise SpecError with a readable message."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {e}") from e
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not a text file ({e.reason})") from e
    if not isinstance(data, dict):
        raise SpecError(
            f"{path}: the spec must be a mapping of fields, e.g.\n  engine: vllm\n  model: ../models/tiny-llama"
        )
    try:
        dep = Deployment.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, str(path))) from e
    return dep.resolved(Path(os.path.abspath(path)).parent)


def as_deployment(spec: Deployment | Path | str) -> Deployment:
    """A Deployment as given, or loaded from a spec file."""
    return spec if isinstance(spec, Deployment) else load_deployment(spec)


__all__ = ["Deployment", "Parallel", "SpecError", "Speculative", "as_deployment", "load_deployment"]
