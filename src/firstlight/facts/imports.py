"""Whether the engine's serving entry point imports in the engine's own interpreter.

A package that is installed but cannot start (a dependency of a dependency missing, a compiled extension
built for another torch) passes every version check and dies seconds into the launch with
`ModuleNotFoundError`. Importing the entry point finds it before; it takes seconds for vLLM, so the answer
is cached per interpreter, entry point and set of installed distributions (any install or upgrade asks
again).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

IMPORT_TIMEOUT_S = 300
CACHE_FILE = "imports.json"
# Import names whose distribution is named otherwise; the rest are installed under their own name.
DISTRIBUTION_OF = {
    "multipart": "python-multipart",
    "yaml": "PyYAML",
    "cv2": "opencv-python",
    "PIL": "Pillow",
    "sklearn": "scikit-learn",
    "zmq": "pyzmq",
    "google": "protobuf",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "jwt": "PyJWT",
}
_MISSING = re.compile(r"No module named '(?P<module>[\w.]+)'")
_IMPORT = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"


class EntrypointImport(BaseModel):
    modules: list[str]
    ok: bool
    error: str | None = None  # the last line the failed import printed
    missing_module: str | None = None
    package: str | None = None  # the distribution that provides the missing module
    cached: bool = False


def cache_dir() -> Path:
    return Path(os.environ.get("FIRSTLIGHT_CACHE") or "~/.cache/firstlight").expanduser()


def import_entrypoints(python: str, modules: tuple[str, ...], fingerprint: str) -> EntrypointImport:
    """Import `modules` in `python` (or answer from the cache for the same installed distributions)."""
    key = "|".join([os.path.realpath(python), ",".join(modules), fingerprint])
    cache = _load()
    if key in cache:
        return EntrypointImport.model_validate({**cache[key], "cached": True})
    result = _import(python, modules)
    if result.error is None or "timed out" not in result.error:  # a slow machine's time-out is asked again
        cache[key] = result.model_dump(exclude={"cached"})
        _save(cache)
    return result


def _import(python: str, modules: tuple[str, ...]) -> EntrypointImport:
    try:
        res = subprocess.run(
            [python, "-c", _IMPORT, *modules], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return EntrypointImport(
            modules=list(modules), ok=False, error=f"importing timed out after {IMPORT_TIMEOUT_S} s"
        )
    except OSError as e:
        return EntrypointImport(modules=list(modules), ok=False, error=f"cannot run {python}: {e}")
    if res.returncode == 0:
        return EntrypointImport(modules=list(modules), ok=True)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    error = lines[-1] if lines else f"exit code {res.returncode}"
    missing = _MISSING.search(error)
    module = missing.group("module") if missing else None
    top = module.split(".")[0] if module else None
    return EntrypointImport(
        modules=list(modules),
        ok=False,
        error=error,
        missing_module=module,
        package=DISTRIBUTION_OF.get(top, top) if top else None,
    )


def _load() -> dict[str, dict[str, object]]:
    try:
        data = json.loads((cache_dir() / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(cache: dict[str, dict[str, object]]) -> None:
    path = cache_dir() / CACHE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        tmp.replace(path)  # whole, never half-written: two checks at once each leave a valid file
    except OSError:
        pass  # no cache: the next check imports again
