"""The detached watcher process: `python -m firstlight.launch.daemon --store PATH --launch ID`.

`up` starts it in a session of its own, so the launch keeps being recorded after `up` returns or
the terminal closes; the engine is its child, so its exit is noticed the moment it happens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

import psutil

from firstlight.deployment import Deployment
from firstlight.launch.supervisor import SECRETS_VAR
from firstlight.launch.watcher import Watcher
from firstlight.secrets import REDACTED, merge_secrets
from firstlight.store import LaunchState, Store


def engine_secrets(public: dict[str, Any], pid: int) -> dict[str, Any]:
    """The secret values a re-attached watcher needs (the API key its probe sends), read from the engine's
    own environment and command line: the store never held them."""
    try:
        proc = psutil.Process(pid)
        environ, cmdline = proc.environ(), proc.cmdline()
    except psutil.Error:
        return {}
    out: dict[str, Any] = {}
    env = {k: environ[k] for k, v in (public.get("env") or {}).items() if v == REDACTED and k in environ}
    if env:
        out["env"] = env
    args = public.get("args")
    if isinstance(args, list):  # list form: the value after the same flag on the engine's command line
        found_at = {}
        for i, value in enumerate(args):
            flag = str(args[i - 1]) if i else ""
            if value == REDACTED and flag.startswith("-") and flag in cmdline[:-1]:
                found_at[str(i)] = cmdline[cmdline.index(flag) + 1]
            elif isinstance(value, str) and value.endswith("=" + REDACTED):
                name = value.split("=", 1)[0]
                found_at.update({str(i): a for a in cmdline if a.startswith(name + "=")})
        if found_at:
            out["args_at"] = found_at
    if isinstance(args, dict):
        found = {}
        for key, value in args.items():
            flag = key if key.startswith("-") else f"--{key}"
            if value == REDACTED and flag in cmdline[:-1]:
                found[key] = cmdline[cmdline.index(flag) + 1]
        if found:
            out["args"] = found
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="firstlight-watcher")
    parser.add_argument("--store", required=True)
    parser.add_argument("--launch", type=int, required=True)
    parser.add_argument("--attach", action="store_true", help="take over a running engine whose watcher died")
    args = parser.parse_args(argv)
    store = Store(args.store)
    launch = store.get_launch(args.launch)
    if launch is None:
        print(f"no launch {args.launch} in {args.store}", file=sys.stderr)
        return 2
    # The watcher must outlive a closed terminal; `down` stops the engine, and the watcher follows.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # the spec as given: the store holds it with its secrets redacted; the values came in this environment,
    # and are taken out of it so that the engine sees only its own variables
    secrets = json.loads(os.environ.pop(SECRETS_VAR, "") or "{}")
    if args.attach and launch.pid:
        secrets = engine_secrets(launch.spec, launch.pid)
    try:
        dep = Deployment.model_validate(merge_secrets(launch.spec, secrets))
        outcome = Watcher(store, launch.id, dep).run(attach=args.attach)
    except Exception as e:
        traceback.print_exc()
        store.update_launch(launch.id, state=LaunchState.FAILED, ended=time.time(), reason=f"watcher error: {e}")
        store.add_event(launch.id, "failed", None, reason=f"watcher error: {e}")
        return 1
    return 0 if outcome in (LaunchState.READY, LaunchState.STOPPED, LaunchState.EXITED) else 1


if __name__ == "__main__":
    sys.exit(main())
