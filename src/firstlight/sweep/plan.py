"""A sweep plan: a base Deployment spec, its variants (each the base plus overrides), an optional fallback
ladder, the load every variant is measured at, the repeats and the SLO.

    base: kimi-k26.yaml
    variants:
      baseline: {}
      ngram: {speculative: {method: ngram, tokens: 4}}
    ladder: {attention-backend: auto, mem-fraction-static: [0.88, 0.85, 0.80]}
    load: {concurrency: [1, 8, 64], num-requests: 200, input-len: 1024, output-len: 256}
    repeats: 3
    slo: {ttft_ms: 2000, tpot_ms: 50}
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from firstlight.deployment import Deployment, format_validation_error, load_deployment
from firstlight.errors import SpecError
from firstlight.secrets import split_secrets


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class Load(BaseModel):
    """The load every variant is measured at: closed-loop concurrency levels or open-loop request rates."""

    model_config = ConfigDict(extra="forbid", alias_generator=_kebab, populate_by_name=True)
    concurrency: list[int] = Field(default_factory=list)
    request_rate: list[float] = Field(default_factory=list)
    max_concurrency: int | None = Field(None, ge=1)
    arrival: Literal["poisson", "constant"] = "poisson"
    num_requests: int | None = Field(None, ge=1)
    duration: float | None = Field(None, gt=0)
    input_len: int = Field(128, ge=1)
    output_len: int = Field(128, ge=1)
    endpoint: Literal["completions", "chat"] = "completions"
    dataset: str | None = None
    warmup: int = Field(2, ge=0)
    seed: int = 0
    timeout: float = Field(600.0, gt=0)

    @model_validator(mode="after")
    def _levels(self) -> Load:
        if bool(self.concurrency) == bool(self.request_rate):
            raise ValueError("give concurrency (closed loop) or request-rate (open loop), one of the two")
        if any(c < 1 for c in self.concurrency) or any(r <= 0 for r in self.request_rate):
            raise ValueError("levels must be positive")
        if self.num_requests is not None and self.duration is not None:
            raise ValueError("give num-requests or duration, not both")
        return self

    def levels(self) -> list[tuple[int | None, float | None]]:
        """(concurrency, rate) per level, lightest first."""
        if self.request_rate:
            return [(self.max_concurrency, r) for r in sorted(self.request_rate)]
        return [(c, None) for c in sorted(self.concurrency)]


class Slo(BaseModel):
    """Per-request targets in milliseconds; a level meets them when `attainment` of its requests meet all."""

    model_config = ConfigDict(extra="forbid")
    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    itl_ms: float | None = Field(None, gt=0)
    e2e_ms: float | None = Field(None, gt=0)
    attainment: float = Field(0.9, gt=0, le=1)

    def seconds(self) -> dict[str, float]:
        """As `bench` takes them: {"ttft": 2.0, ...}."""
        pairs = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("itl", self.itl_ms), ("e2e", self.e2e_ms))
        return {key: ms / 1000 for key, ms in pairs if ms is not None}


LadderValues = list[Any] | Literal["auto"]


class SweepPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("", description="defaults to the plan file's name")
    base: Path
    variants: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"baseline": {}})
    baseline: str = Field("", description="the variant the others are compared with (default: baseline, or the first)")
    ladder: dict[str, LadderValues] = Field(default_factory=dict)
    load: Load
    repeats: int = Field(1, ge=1)
    slo: Slo | None = None
    plan_dir: Path = Field(Path("."), exclude=True)

    @field_validator("variants", mode="before")
    @classmethod
    def _overrides(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): ({} if v is None else v) for k, v in value.items()}
        return value

    @field_validator("variants")
    @classmethod
    def _some(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not value:
            raise ValueError("name at least one variant, e.g. baseline: {}")
        return value

    @field_validator("base", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("name the Deployment spec the variants start from")
        return value

    @field_validator("ladder")
    @classmethod
    def _rungs(cls, value: dict[str, LadderValues]) -> dict[str, LadderValues]:
        for key, values in value.items():
            if values != "auto" and not values:
                raise ValueError(f"{key}: give the values to try in order, or auto")
        return value

    @model_validator(mode="after")
    def _baseline(self) -> SweepPlan:
        if not self.baseline:
            self.baseline = "baseline" if "baseline" in self.variants else next(iter(self.variants))
        elif self.baseline not in self.variants:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants: {', '.join(self.variants)}")
        return self

    def deployment(self, variant: str) -> Deployment:
        """The base spec with the variant's overrides merged in (mappings merge, null removes a key, the rest
        replaces); paths in the overrides are relative to the plan. Raises SpecError naming the field."""
        base = load_deployment(self.base).model_dump(mode="json", exclude_none=True)
        overrides = self.variants[variant]
        merged = merge(base, overrides)
        if "name" not in overrides:
            merged["name"] = f"{base['name']}-{variant}"
        try:
            dep = Deployment.model_validate(merged)
        except ValidationError as e:
            raise SpecError(format_validation_error(e, f"{self.base} with variant {variant!r}")) from e
        return dep.resolved(self.plan_dir)

    def cells(self) -> list[Cell]:
        """Every measurement the plan asks for, in the order they run: per variant, each repeat sweeps the
        levels lightest first (so an interrupted sweep has whole curves)."""
        levels = self.load.levels()
        return [
            Cell(variant, repeat, index, concurrency, rate)
            for variant in self.variants
            for repeat in range(self.repeats)
            for index, (concurrency, rate) in enumerate(levels)
        ]

    def public(self) -> dict[str, Any]:
        """The plan as stored: secret values in the overrides redacted, each variant's fingerprint kept."""
        data = self.model_dump(mode="json", by_alias=True)
        data["variants"] = {name: split_secrets(o)[0] for name, o in self.variants.items()}
        data["base"] = str(self.base)
        data["fingerprints"] = {name: self.fingerprint(name) for name in self.variants}
        return data

    def fingerprint(self, variant: str) -> str:
        """What a variant launches, as one value: a resumed sweep refuses a variant whose launch changed."""
        dep = self.deployment(variant).model_dump(mode="json", exclude={"name", "log_dir", "stall"})
        return hashlib.sha1(json.dumps(split_secrets(dep)[0], sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Cell:
    """One measurement: a variant at one load level, one repeat."""

    variant: str
    repeat: int
    level: int  # index of the level, lightest first
    concurrency: int | None
    rate: float | None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.variant, self.level, self.repeat)

    @property
    def load_name(self) -> str:
        if self.rate is not None:
            return f"rate {self.rate:g}/s"
        return f"C={self.concurrency}"


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_plan(path: Path | str) -> SweepPlan:
    """Load and validate a plan file; SpecError names the field and the fix."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such plan file")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: not a valid YAML plan: {e}") from e
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a plan is a mapping, e.g.\n  base: spec.yaml\n  load: {{concurrency: [1, 8]}}")
    plan_dir = Path(os.path.abspath(path)).parent
    try:
        plan = SweepPlan.model_validate({**data, "plan_dir": plan_dir})
    except ValidationError as e:
        fields = [f.alias or name for name, f in SweepPlan.model_fields.items() if not f.exclude]
        raise SpecError(format_validation_error(e, str(path), "plan", PLAN_EXAMPLES, fields)) from e
    base = plan.base.expanduser()
    plan.base = base if base.is_absolute() else Path(os.path.normpath(plan_dir / base))
    if not plan.base.is_file():
        raise SpecError(f"{path}: base: {plan.base} is not a spec file\n      e.g. {PLAN_EXAMPLES['base']}")
    plan.name = plan.name or path.stem
    from firstlight.engines import get_engine
    from firstlight.sweep.ladder import build_ladder

    for variant in plan.variants:
        dep = plan.deployment(variant)  # every variant is a valid spec before anything starts
        try:
            build_ladder(plan.ladder, get_engine(dep.engine), None)  # and every ladder key one its engine has
        except SpecError as e:
            raise SpecError(f"{path}: {e}\n      e.g. {PLAN_EXAMPLES['ladder']}") from e
    return plan


PLAN_EXAMPLES = {
    "base": "base: tiny-vllm-cpu.yaml   # a Deployment spec, relative to the plan",
    "variants": "variants: {baseline: {}, ngram: {speculative: {method: ngram, tokens: 4}}}",
    "ladder": "ladder: {attention-backend: auto, gpu-memory-utilization: [0.9, 0.85]}",
    "load": "load: {concurrency: [1, 4, 16], num-requests: 100, input-len: 512, output-len: 128}",
    "repeats": "repeats: 3",
    "slo": "slo: {ttft_ms: 2000, tpot_ms: 50}",
}
