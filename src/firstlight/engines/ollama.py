"""Ollama, whose logs firstlight reads but does not launch: its own server lines (Go's structured logging,
`time=... level=INFO source=routes.go:1385 msg="..."`) around the output of the llama.cpp runner it starts for
each model, so its phases are the runner's plus its own."""

from __future__ import annotations

import re

from firstlight.engines.base import EngineAdapter, compile_all
from firstlight.engines.llama_cpp import LLAMA_CPP
from firstlight.logs import aside_rules, phase_rules

OLLAMA = EngineAdapter(
    name="ollama",
    phases=(
        *phase_rules(
            ("weights_loading", r'msg="(starting llama server|loading model)'),
            # its own engine (2025+) lays the model out per device: weights, then the KV cache's size
            ("kv_cache_allocated", r'msg="kv cache" device='),
        ),
        *(rule for rule in LLAMA_CPP.phases if not rule.aside),
        # the server listens at start and loads a model when one is asked for
        *aside_rules(("http_listening", r'msg="Listening on ')),
    ),
    progress=LLAMA_CPP.progress,
    # the runner it started answers (0.32+ runs llama-server itself); 0.1.x's embedded llama.cpp server said only
    # that its slots were idle
    ready_line=re.compile(r"(llama runner|llama-server) started in [\d.]+ ?s|all slots are idle"),
    # its scheduler logs a model that failed to load at INFO (server/sched.go: `slog.Info("Load failed", ...,
    # "error", err)`)
    error_line=re.compile(r'\blevel=ERROR\b|msg="Load failed" .*\berror='),
    # the runner it started died: its own lines above say why
    wrapper_lines=compile_all(r'msg="llama runner (process has )?terminated'),
    line_prefix=re.compile(r'time=\S+ level=\w+ source=[\w./-]+:\d+ msg="?'),
    log_time=re.compile(r"\btime=(?P<ts>\d{4}-\d\d-\d\dT[\d:.]+)"),
    # its own Go log lines only: a bare "ollama" is also in the path of a model llama-server loads from ~/.ollama
    fingerprints=compile_all(r"\blevel=\w+ source=[\w./-]+\.go:\d+ msg="),
    wraps=("llama.cpp",),
)
ADAPTERS = (OLLAMA,)
