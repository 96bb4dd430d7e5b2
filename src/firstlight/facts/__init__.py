"""Facts: what firstlight observes once (GPUs, host, model, engine software), as JSON-ready data.

Every check is a pure function over these facts, so `facts --save` on a GPU machine and
`check --facts FILE` anywhere else give the same findings.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from firstlight import __version__
from firstlight.facts.gpus import gather_gpu_facts
from firstlight.facts.host import gather_host_facts
from firstlight.facts.model import gather_model_facts
from firstlight.facts.software import gather_software_facts

SECTIONS = ("gpus", "host", "model", "software")


def gather_facts(
    python: Path | str | None, model: Path | str | None, host: str = "127.0.0.1", port: int | None = None
) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "recorded": {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "hostname": socket.gethostname(),
            "by": f"firstlight {__version__}",
        },
        "gpus": gather_gpu_facts(),
        "host": gather_host_facts(model, host, port),
    }
    if model is not None:
        facts["model"] = gather_model_facts(model)
    if python is not None:
        facts["software"] = gather_software_facts(python)
    return facts


def load_facts(path: Path | str) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not any(k in data for k in SECTIONS):
        raise ValueError(f"{path} holds no facts (expected some of: {', '.join(SECTIONS)})")
    return data


def save_facts(facts: dict[str, Any], path: Path | str) -> None:
    Path(path).write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
