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

from firstlight.deployment import Deployment
from firstlight.launch.supervisor import SECRETS_VAR
from firstlight.launch.watcher import Watcher
from firstlight.secrets import merge_secrets
from firstlight.store import LaunchState, Store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="firstlight-watcher")
    parser.add_argument("--store", required=True)
    parser.add_argument("--launch", type=int, required=True)
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
    try:
        outcome = Watcher(store, launch.id, Deployment.model_validate(merge_secrets(launch.spec, secrets))).run()
    except Exception as e:
        traceback.print_exc()
        store.update_launch(launch.id, state=LaunchState.FAILED, ended=time.time(), reason=f"watcher error: {e}")
        store.add_event(launch.id, "failed", None, reason=f"watcher error: {e}")
        return 1
    return 0 if outcome in (LaunchState.READY, LaunchState.STOPPED, LaunchState.EXITED) else 1


if __name__ == "__main__":
    sys.exit(main())
