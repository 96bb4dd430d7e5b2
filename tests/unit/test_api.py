"""The public API: every name in `firstlight.__all__` resolves, the README's example uses only those, and
`import firstlight` stays cheap (names are imported when first used)."""

from __future__ import annotations

import re
import subprocess
import sys

import firstlight
from tests.conftest import ROOT


def test_every_public_name_resolves() -> None:
    for name in firstlight.__all__:
        assert getattr(firstlight, name) is not None, name


def test_readme_library_example_uses_public_names() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The library", 1)[1].split("\n## ", 1)[0]
    used = set(re.findall(r"\bfirstlight\.(\w+)", section))
    assert used, "the README shows the library"
    assert used <= set(firstlight.__all__), used - set(firstlight.__all__)


def test_verbs_do_not_collide_with_packages() -> None:
    """`firstlight.bench` stays the function after the package behind it is imported."""
    import firstlight.benchmark.runner
    import firstlight.diagnosis
    import firstlight.rendering
    import firstlight.reports

    for verb in ("bench", "diagnose", "render", "report", "check", "up", "wait", "down"):
        assert callable(getattr(firstlight, verb)), verb


def test_import_is_cheap() -> None:
    code = (
        "import sys, firstlight; heavy = [m for m in ('numpy', 'pydantic', 'httpx', 'rich', 'typer', "
        "'firstlight.benchmark', 'firstlight.launch', 'firstlight.preflight') if m in sys.modules]; print(heavy)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


def test_errors_form_one_family_with_exit_codes() -> None:
    for name in firstlight.__all__:
        obj = getattr(firstlight, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, firstlight.FirstlightError), name
            assert obj.exit_code in (1, 2), name
    assert firstlight.PreflightFailed("x", []).exit_code == 2
    assert firstlight.BenchAborted("x", run_id=3).run_id == 3
