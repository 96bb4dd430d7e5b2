"""`make demo`: up the tiny model on a CPU engine, stream one completion, bench it, report, down.

`--engine vllm` (the default) uses vLLM's CPU build, `--engine sglang` the real SGLang server. Runs the real
commands a user would type; the store is the default one, so `firstlight status` shows the demo's launch
afterwards.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import httpx

from firstlight.benchmark import endpoint
from firstlight.deployment import load_deployment

ROOT = Path(__file__).resolve().parents[1]
SPECS = {"vllm": ROOT / "examples" / "tiny-vllm-cpu.yaml", "sglang": ROOT / "examples" / "tiny-sglang-cpu.yaml"}


def firstlight(*args: str) -> int:
    print(f"\n$ firstlight {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, "-m", "firstlight", *args])


def stream_one(url: str, model: str) -> None:
    print(f"\n$ one streamed completion from {url}", flush=True)
    body = endpoint.request_body(
        "completions", model, "The operator watches the model", 32, usage_per_chunk=False, temperature=0.8
    )
    usage = None
    with httpx.stream("POST", url + endpoint.path("completions"), json=body, timeout=60) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", []):
                print(choice.get("text", ""), end="", flush=True)
            usage = chunk.get("usage") or usage
    print(f"\n({usage['completion_tokens'] if usage else '?'} tokens; the model is random, so is the text)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=sorted(SPECS), default="vllm")
    spec = SPECS[parser.parse_args().engine]
    dep = load_deployment(spec)
    code = firstlight("up", str(spec))
    if code != 0:
        return code
    try:
        stream_one(dep.url, dep.served_model_name)
        code = firstlight(
            "bench",
            "--url",
            dep.url,
            "--concurrency",
            "1,4,16",
            "--num-requests",
            "32",
            "--input-len",
            "64",
            "--output-len",
            "64",
            "--label",
            "demo",
        )
        if code == 0:
            report = ROOT / ".firstlight" / "demo-report.html"
            firstlight("report", "--html", str(report))
        firstlight("status")
    finally:
        firstlight("down")
    return code


if __name__ == "__main__":
    sys.exit(main())
