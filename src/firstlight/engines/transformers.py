"""`transformers serve`: the simplest engine, quiet logs (reference/cpu-engines.md §1)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from firstlight.engines.base import EngineAdapter, Software, compile_all, extra_args
from firstlight.logs import phase_rules, progress_rules

if TYPE_CHECKING:
    from firstlight.deployment import Deployment


def build_argv(dep: Deployment) -> list[str]:
    # The console script sits beside the interpreter; the server pins the model id it was given.
    cli = Path(dep.python).parent / "transformers"
    return [
        str(cli),
        "serve",
        str(dep.model),
        "--host",
        dep.host,
        "--port",
        str(dep.port),
        *extra_args(dep.args),
    ]


TRANSFORMERS = EngineAdapter(
    name="transformers",
    build_argv=build_argv,
    phases=phase_rules(
        ("weights_loading", r"\[transformers\] Loading |Loading weights:|Loading checkpoint shards"),
        ("weights_loaded", r"Loading weights: 100%|Loading checkpoint shards: 100%"),
        ("http_listening", r"Started server process|Uvicorn running on "),
    ),
    progress=progress_rules(
        (
            "weights_loading",
            r"Loading (?:weights|checkpoint shards):\s+\d+%.*?\|\s*(?P<done>\d+)/(?P<total>\d+)",
            "tensors",
        ),
    ),
    ready_line=re.compile(r"Application startup complete\."),
    # transformers serve's own lines; a bare "[transformers]" prefix is the library's, in every engine's log
    fingerprints=compile_all(
        r"\[transformers\] (Loading \S+@|\[Request received\]|Ignoring unsupported fields)",
        r"transformers serve",
        r"\btransformers/",
    ),
    # every engine reads the model's config through transformers: its configuration classes validate it
    config_sources=(r"transformers/configuration_utils\.py", r"transformers/models/\w+/configuration_\w+\.py"),
    registry_sources=(r"transformers/models/auto/(configuration|modeling|tokenization|auto_factory)\w*\.py",),
    default_env={"HF_HUB_OFFLINE": "1"},
    request_model=lambda d: str(d.model),
    # the command module, and the server it starts (FastAPI and its dependencies load there)
    software=Software(
        distributions=("transformers",), entrypoints=("transformers.cli.serve", "transformers.cli.serving.server")
    ),
)
ADAPTERS = (TRANSFORMERS,)
