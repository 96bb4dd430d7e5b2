"""Facts: what firstlight observes once (GPUs, host, model, engine software), typed and parsed once.

Every check is a pure function over these facts, so `facts --save` on a GPU machine and
`check --facts FILE` anywhere else give the same findings.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from firstlight.engines import ENGINES
from firstlight.errors import FactsError
from firstlight.facts.gpus import Gpu, GpuFacts, GpuProcess, gather_gpu_facts
from firstlight.facts.host import HostFacts, gather_host_facts
from firstlight.facts.model import ModelConfig, ModelFacts, gather_model_facts
from firstlight.facts.software import SoftwareFacts, gather_program_facts, gather_software_facts
from firstlight.version import __version__

SECTIONS = ("gpus", "host", "model", "software")


class Recorded(BaseModel):
    """When, where and by what the facts were observed."""

    model_config = ConfigDict(extra="ignore")
    at: str = ""
    hostname: str = ""
    by: str = ""


class Source(BaseModel):
    """Where one section of the facts came from: observed here now, read from a recording, or made up from
    the GPU catalogue (`check --gpus`)."""

    kind: Literal["live", "recorded", "synthetic"] = "live"
    at: str = ""
    hostname: str = ""
    file: str = ""
    detail: str = ""

    @property
    def label(self) -> str:
        if self.kind == "recorded":
            where = f" ({self.file})" if self.file else ""
            return f"recorded on {self.hostname or 'an unnamed host'} at {self.at or 'an unknown time'}{where}"
        if self.kind == "synthetic":
            return f"synthetic: {self.detail}" if self.detail else "synthetic"
        return "live"


class Facts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    recorded: Recorded = Field(default_factory=Recorded)
    gpus: GpuFacts = Field(default_factory=GpuFacts)
    host: HostFacts = Field(default_factory=HostFacts)
    model: ModelFacts | None = None
    software: SoftwareFacts | None = None
    # where each section came from (not saved: a saved file's sections are "recorded" when read back)
    sources: dict[str, Source] = Field(default_factory=dict, exclude=True)
    # what was seen while the facts were put together (a recorded section that describes something else)
    notes: list[str] = Field(default_factory=list, exclude=True)

    def source(self, section: str) -> Source:
        return self.sources.get(section, Source())

    def sections(self) -> set[str]:
        """The sections this value really holds (a recorded file may have only some; a null one is absent)."""
        return {s for s in SECTIONS if s in self.model_fields_set and getattr(self, s) is not None}

    def to_json(self) -> str:
        """Only the sections held: a file without `model` lets `check --facts` observe the spec's model."""
        data = self.model_dump(mode="json")
        held = {k: v for k, v in data.items() if k not in SECTIONS or k in self.sections()}
        return json.dumps(held, indent=1, sort_keys=True) + "\n"


def gather_facts(
    python: Path | str | None = None,
    model: Path | str | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    program: Path | str | None = None,
    sections: Iterable[str] = SECTIONS,
) -> Facts:
    """Observe the asked sections now; model and software only where a model or an engine is named."""
    wanted = set(sections)
    observed: dict[str, object] = {
        "recorded": Recorded(
            at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            hostname=socket.gethostname(),
            by=f"firstlight {__version__}",
        )
    }
    if "gpus" in wanted:
        observed["gpus"] = gather_gpu_facts()
    if "host" in wanted:
        observed["host"] = gather_host_facts(model, host, port)
    if "model" in wanted and model is not None:
        observed["model"] = gather_model_facts(model)
    if "software" in wanted and program is not None:
        observed["software"] = gather_program_facts(program)
    elif "software" in wanted and python is not None:
        observed["software"] = gather_software_facts(python, ENGINES.values())
    return Facts(**observed)  # type: ignore[arg-type]


def load_facts(path: Path | str) -> Facts:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise FactsError(f"cannot read facts from {path}: {e}") from e
    if not isinstance(data, dict) or not any(k in data for k in SECTIONS):
        raise FactsError(f"{path} holds no facts (expected some of: {', '.join(SECTIONS)})")
    try:
        facts = Facts.model_validate(data)
    except ValidationError as e:
        raise FactsError(f"{path}: not facts firstlight can read: {e}") from e
    recorded = Source(kind="recorded", at=facts.recorded.at, hostname=facts.recorded.hostname, file=str(path))
    facts.sources = dict.fromkeys(facts.sections(), recorded)
    return facts


def save_facts(facts: Facts, path: Path | str) -> None:
    Path(path).write_text(facts.to_json())


__all__ = [
    "SECTIONS",
    "Facts",
    "Gpu",
    "GpuFacts",
    "GpuProcess",
    "HostFacts",
    "ModelConfig",
    "ModelFacts",
    "Recorded",
    "SoftwareFacts",
    "Source",
    "gather_facts",
    "load_facts",
    "save_facts",
]
