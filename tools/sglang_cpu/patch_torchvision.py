"""Let PyPI's torchvision import beside the CPU build of torch (run by `make sglang`, idempotent).

SGLang imports torchvision unconditionally (`configs/nano_nemotron_vl.py` → `multimodal/internvl_utils.py`).
PyPI's torchvision wheel links `libtorch_cuda.so`, so beside CPU torch its compiled ops fail to load, and
`torchvision/_meta_registrations.py` then raises at import on its two fake-kernel registrations that do not
check `torchvision.extension._has_ops()` first (its other registrations do). This guards those two the same
way; torchvision's Python code (transforms) works without the compiled ops.

Usage: patch_torchvision.py SITE_PACKAGES
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

UNGUARDED = re.compile(r'^@torch\.library\.register_fake\("torchvision::(nms|qnms)"\)$', re.MULTILINE)
GUARD = '@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops() else (lambda f: f))'


def main(site_packages: str) -> int:
    path = Path(site_packages) / "torchvision" / "_meta_registrations.py"
    text = path.read_text()
    patched, count = UNGUARDED.subn(lambda m: GUARD.format(op=m.group(1)), text)
    if count == 0:
        if GUARD.format(op="nms") in text:
            return 0  # already patched
        print(f"{path}: the two unguarded registrations were not found; is this torchvision 0.28?", file=sys.stderr)
        return 1
    path.write_text(patched)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
