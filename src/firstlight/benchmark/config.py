"""What a benchmark run is asked to do: the server, the loads, the workload, the SLOs.

A run's configuration is stored with it (`public()`, without the API key) and read back by
`--resume`, so the field names are a stored format: add fields with defaults, never rename one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firstlight.errors import BenchError, RunNotFound

if TYPE_CHECKING:
    from firstlight.store import Store

MAX_PROMPTS = 20_000
ENDPOINT_KINDS = ("completions", "chat")
ARRIVALS = ("poisson", "constant")
SLO_KEYS = ("ttft", "tpot", "e2e", "itl")


@dataclass(frozen=True)
class LevelSpec:
    """One load level: a closed loop of `concurrency` requests in flight, or an open loop at `rate`
    requests/s with at most `concurrency` in flight (None: no cap)."""

    index: int
    concurrency: int | None
    rate: float | None


@dataclass
class BenchConfig:
    url: str
    model: str | None = None
    endpoint: str = "completions"  # completions | chat
    concurrency: list[int] = field(default_factory=list)
    request_rates: list[float] = field(default_factory=list)
    arrival: str = "poisson"  # poisson | constant
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration: float | None = None
    warmup: int = 2
    input_len: int = 128
    output_len: int = 128
    dataset: str | None = None
    slo: dict[str, float] = field(default_factory=dict)  # seconds, by SLO_KEYS
    label: str = ""
    timeout: float = 600.0
    temperature: float = 0.0
    seed: int = 0
    tokenizer_dir: str | None = None
    api_key: str | None = None
    workers: int | str = 1  # processes that send the requests (1: this one), or "auto" (benchmark.sharing)

    @classmethod
    def from_options(
        cls,
        *,
        url: str | None = None,
        launch: Path | str | None = None,
        concurrency: str | None = None,
        request_rate: str | None = None,
        slo: str | None = None,
        dataset: Path | str | None = None,
        tokenizer: Path | str | None = None,
        workers: int | str = 1,
        **options: Any,
    ) -> BenchConfig:
        """A configuration from the command line's options (levels and SLOs as text, e.g. "1,8,64" and
        "ttft=500"); the other options are fields by name. Raises BenchError with a message that says
        how to fix the option. With `launch` (a spec to bring up) the URL is filled in once it is up."""
        if (url is None) == (launch is None):
            raise BenchError("give exactly one of --url (a running server) and --launch (a spec to bring up)")
        unknown = set(options) - {f.name for f in fields(cls)}
        if unknown:
            raise BenchError(f"unknown benchmark options: {', '.join(sorted(unknown))}")
        try:
            levels = parse_list(concurrency, int) if concurrency else []
            rates = parse_list(request_rate, float) if request_rate else []
            slos = parse_slo(slo)
            processes = parse_workers(workers)
        except ValueError as e:
            raise BenchError(str(e)) from e
        cfg = cls(
            url=(url or "").rstrip("/"),
            concurrency=levels or ([] if rates else [1]),  # stored as given: one closed-loop level by default
            request_rates=rates,
            slo=slos,
            dataset=str(dataset) if dataset else None,
            tokenizer_dir=str(tokenizer) if tokenizer else None,
            workers=processes,
            **options,
        )
        cfg.warmup = max(cfg.warmup, 0)
        cfg.validate()
        return cfg

    @classmethod
    def of_run(cls, store: Store, run_id: int, api_key: str | None = None) -> BenchConfig:
        """The configuration a stored run was made with (the API key is never stored: give it again)."""
        run = store.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no benchmark run {run_id} in {store.path}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in run["config"].items() if k in known and k != "api_key"}, api_key=api_key)

    def validate(self) -> None:
        """Raise BenchError for a configuration that cannot run, naming the option to change."""
        if self.concurrency and self.request_rates:
            raise BenchError("give --concurrency or --request-rate, not both")
        if self.endpoint not in ENDPOINT_KINDS:
            raise BenchError("--endpoint must be completions or chat")
        if self.arrival not in ARRIVALS:
            raise BenchError("--arrival must be poisson or constant")
        if self.num_requests is not None and self.duration is not None:
            raise BenchError("give --num-requests or --duration, not both")
        if self.dataset is not None and not Path(self.dataset).is_file():
            raise BenchError(f"--dataset {self.dataset}: no such file")
        try:
            parse_workers(self.workers)
        except ValueError as e:
            raise BenchError(str(e)) from e
        for name, value in (
            ("--num-requests", self.num_requests),
            ("--input-len", self.input_len),
            ("--output-len", self.output_len),
        ):
            if value is not None and value < 1:
                raise BenchError(f"{name} must be at least 1")

    def levels(self) -> list[LevelSpec]:
        if self.request_rates:
            return [LevelSpec(i, self.max_concurrency, r) for i, r in enumerate(self.request_rates)]
        return [LevelSpec(i, c, None) for i, c in enumerate(self.concurrency or [1])]

    def requests_for(self, level: LevelSpec) -> int:
        if self.num_requests:
            return self.num_requests
        if self.duration:
            return MAX_PROMPTS
        if level.rate is not None:
            return int(min(max(level.rate * 30, 20), 2000))
        return int(min(max((level.concurrency or 1) * 5, 20), 2000))

    def prompts_needed(self) -> int:
        """Prompts for the longest level, plus the warm-up's own (so no prompt is cached before it counts)."""
        return min(max(self.requests_for(level) for level in self.levels()), MAX_PROMPTS) + self.warmup

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("api_key")  # never stored
        return data


def parse_list(text: str, kind: type) -> list[Any]:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"{text!r}: expected a comma-separated list of numbers, e.g. 1,8,64") from e
    if not values or any(v <= 0 or (isinstance(v, float) and math.isinf(v)) for v in values):
        raise ValueError(f"{text!r}: expected positive numbers, e.g. 1,8,64")
    return values


def parse_workers(value: int | str) -> int | str:
    """`--workers`: a number of processes (at least 1) or "auto"."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1 or isinstance(value, float | bool):
        raise ValueError(f"--workers {value!r}: expected a number of processes (1 or more) or auto")
    return n


def parse_slo(text: str | None) -> dict[str, float]:
    """`ttft=500,tpot=50,e2e=20000` (milliseconds) → {"ttft": 0.5, ...} in seconds."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key not in SLO_KEYS or not value:
            raise ValueError(f"--slo {text!r}: expected e.g. ttft=500,tpot=50 (milliseconds); bad part {part!r}")
        out[key] = float(value) / 1000.0
    return out
