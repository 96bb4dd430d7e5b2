"""Malformed specs, plans and facts files, generated (hypothesis): each ends in the library's own error
naming what is wrong (a field, or the file), never in a traceback of another kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstlight.deployment import Deployment, load_deployment
from firstlight.errors import FactsError, SpecError
from firstlight.facts import SECTIONS, load_facts
from firstlight.sweep import load_plan
from tests.conftest import DATA

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.text(max_size=20)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
SPEC_KEYS = st.sampled_from([*Deployment.model_fields, "enigne", "tp", "gpus"])
# a spec that is mostly right, with some fields replaced by anything
GOOD = {"engine": "vllm", "python": "/usr/bin/python3", "model": "/models/m", "port": 8000}
QUIET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def named_a_field(message: str, data: dict[str, Any]) -> bool:
    return any(str(key) in message for key in data) or "required field is missing" in message


@QUIET
@given(st.dictionaries(SPEC_KEYS, VALUES, max_size=6))
def test_any_spec_mapping_loads_or_names_the_field(tmp_path: Path, fields: dict[str, Any]) -> None:
    data = {**GOOD, **fields}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    try:
        load_deployment(path)
    except SpecError as e:
        assert str(path) in str(e)
        assert named_a_field(str(e), data), str(e)


@QUIET
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_file_as_a_spec_or_a_plan_is_a_spec_error(tmp_path: Path, content: str | bytes) -> None:
    path = tmp_path / "any.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    for load in (load_deployment, load_plan):
        try:
            load(path)
        except SpecError as e:
            assert str(path) in str(e)


@QUIET
@given(
    st.dictionaries(
        st.sampled_from(["base", "variants", "ladder", "load", "repeats", "slo", "baseline", "name", "extra"]),
        VALUES,
        max_size=5,
    )
)
def test_any_plan_mapping_loads_or_names_the_field(tmp_path: Path, fields: dict[str, Any]) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({**GOOD, "model": str(tmp_path)}))
    data = {"base": "base.yaml", "load": {"concurrency": [1]}, **fields}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    try:
        load_plan(path)
    except SpecError as e:
        assert str(path) in str(e) or "base.yaml" in str(e) or "variant" in str(e)


RECORDED = json.loads((DATA / "facts" / "h200x1-idle.json").read_text())


@QUIET
@given(st.sampled_from(SECTIONS), st.sampled_from(["gpus", "host", "model", "software", "processes", "memory"]), VALUES)
def test_any_damaged_facts_file_is_a_facts_error(tmp_path: Path, section: str, key: str, value: Any) -> None:
    data = json.loads(json.dumps(RECORDED))
    target = data.get(section)
    if isinstance(target, dict):
        target[key] = value
    else:
        data[section] = value
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    try:
        load_facts(path)
    except FactsError as e:
        assert str(path) in str(e)
