"""Sweep plans: variants merged over the base spec, errors that name the field, cells in order, the ladder,
and the engine-neutral speculative form rendered for each engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from firstlight.deployment import Deployment
from firstlight.engines import get_engine
from firstlight.errors import SpecError
from firstlight.facts import load_facts
from firstlight.facts.software import SoftwareFacts
from firstlight.sweep import dry_run, load_plan
from firstlight.sweep.ladder import build_ladder
from tests.conftest import DATA, ENGINE_PY, TINY_MODEL


def write_plan(tmp_path: Path, **plan: object) -> Path:
    base = {
        "name": "tiny",
        "engine": "vllm",
        "python": str(ENGINE_PY),
        "model": str(TINY_MODEL),
        "port": 8200,
        "args": {"dtype": "float32", "max-model-len": 2048},
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "hf_secret_value"},
    }
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    data = {"base": "base.yaml", "load": {"concurrency": [4, 1, 16], "num-requests": 10}, **plan}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_variants_merge_over_the_base_and_null_removes(tmp_path: Path) -> None:
    plan = load_plan(
        write_plan(
            tmp_path,
            variants={
                "baseline": {},
                "ngram": {"speculative": {"method": "ngram", "tokens": 4}, "args": {"max-model-len": 1024}},
                "nokv": {"env": {"VLLM_CPU_KVCACHE_SPACE": None}},
            },
        )
    )
    assert plan.name == "campaign" and plan.baseline == "baseline"
    base, ngram, nokv = (plan.deployment(v) for v in ("baseline", "ngram", "nokv"))
    assert base.name == "tiny-baseline" and base.speculative is None
    assert ngram.args == {"dtype": "float32", "max-model-len": 1024}  # merged key by key
    assert ngram.speculative is not None and ngram.speculative.tokens == 4
    assert "VLLM_CPU_KVCACHE_SPACE" not in nokv.env and nokv.env["HF_TOKEN"] == "hf_secret_value"
    assert plan.fingerprint("baseline") != plan.fingerprint("ngram")
    assert "hf_secret_value" not in json.dumps(plan.public())


def test_cells_run_each_repeat_over_the_levels_lightest_first(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, variants={"a": {}, "b": {}}, repeats=2))
    cells = plan.cells()
    assert len(cells) == 2 * 2 * 3
    assert [(c.variant, c.repeat, c.concurrency) for c in cells[:4]] == [
        ("a", 0, 1),
        ("a", 0, 4),
        ("a", 0, 16),
        ("a", 1, 1),
    ]
    assert plan.baseline == "a"  # no variant is called baseline: the first one is


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"load": {"concurrency": [1], "request-rate": [2.0]}}, "load: give concurrency (closed loop) or request-rate"),
        ({"repeats": 0}, "repeats: Input should be greater than or equal to 1"),
        ({"variants": {"x": {"speculative": {"method": "eagle3", "tokens": 3}}}}, "draft"),
        ({"variants": {"x": {"engine": "nope"}}}, "unknown engine 'nope'"),
        ({"baseline": "missing"}, "baseline 'missing' is not one of the variants"),
        ({"ladder": {"gpu-memory-utilization": []}}, "give the values to try in order"),
        ({"lader": {}}, "lader: unknown field"),
    ],
)
def test_a_bad_plan_names_the_field(tmp_path: Path, change: dict[str, object], says: str) -> None:
    with pytest.raises(SpecError) as err:
        load_plan(write_plan(tmp_path, **change))
    assert says in str(err.value)


def test_the_ladder_climbs_only_for_failures_its_rungs_cure(tmp_path: Path) -> None:
    vllm = get_engine("vllm")
    ladder = build_ladder({"memory-fraction": [0.9, 0.85, 0.8], "max-model-len": [8192, 4096]}, vllm, None)
    assert ladder.current() == {"gpu-memory-utilization": 0.9, "max-model-len": 8192}
    assert ladder.climb("missing_model_files") is None and ladder.climb("port_in_use") is None
    assert ladder.climb("cuda_oom") == "--gpu-memory-utilization 0.9 → 0.85"
    assert ladder.climb("insufficient_kv_cache") == "--gpu-memory-utilization 0.85 → 0.8"
    assert ladder.climb("insufficient_kv_cache") == "--max-model-len 8192 → 4096"  # the fraction is exhausted
    assert ladder.climb("cuda_oom") is None
    dep = Deployment.model_validate(
        {"engine": "vllm", "python": str(ENGINE_PY), "model": str(TINY_MODEL), "args": ["--max-model-len", "2048"]}
    )
    assert ladder.applied(dep).args == ["--gpu-memory-utilization", "0.8", "--max-model-len", "4096"]
    with pytest.raises(SpecError, match="not a setting firstlight knows how to climb"):
        build_ladder({"dtype": ["bfloat16"]}, vllm, None)


def test_auto_backend_ladder_follows_the_recorded_gpu() -> None:
    facts = load_facts(DATA / "facts" / "h200x1-idle.json")
    ladder = build_ladder({"attention-backend": "auto"}, get_engine("sglang"), facts)
    assert ladder.rungs[0].flag == "attention-backend" and ladder.rungs[0].values[0] == "fa3"
    assert ladder.climb("attention_backend_unsupported") is not None
    assert ladder.climb("cuda_oom") is None
    nowhere = build_ladder({"attention-backend": "auto"}, get_engine("vllm"), None)
    assert nowhere.rungs == [] and "no GPU here" in nowhere.notes[0]


def test_dry_run_prints_every_launch_with_secrets_redacted(tmp_path: Path) -> None:
    plan = load_plan(
        write_plan(
            tmp_path,
            variants={
                "baseline": {"args": {"api-key": "sk-secret"}},
                "ngram": {"speculative": {"method": "ngram", "tokens": 2}},
            },
            ladder={"gpu-memory-utilization": [0.95, 0.9]},
        )
    )
    text = "\n".join(dry_run(plan))
    assert "3 level(s) × 1 repeat(s) = 6 cells" in text
    assert "--gpu-memory-utilization 0.95" in text and "then, on cuda_oom" in text and "0.9" in text
    assert """--speculative-config '{"method":"ngram","num_speculative_tokens":2}'""" in text
    assert "sk-secret" not in text


# --- the engine-neutral speculative form, checked against the installed engines' own lists

METHODS = [
    {"method": "eagle3", "draft": "/models/eagle3", "tokens": 3},
    {"method": "eagle", "draft": "/models/eagle", "tokens": 2},
    {"method": "mtp", "tokens": 1},
    {"method": "ngram", "tokens": 4},
    {"method": "dflash", "draft": "/models/dflash", "tokens": 8},
    {"method": "draft_model", "draft": "/models/small", "tokens": 4},
]


def sglang_0_5_23() -> SoftwareFacts:
    """What firstlight's probe read from the real sglang 0.5.23 wheel (tests/data/software/sglang-0.5.23)."""
    recorded = json.loads((DATA / "software" / "sglang-0.5.23" / "probe.json").read_text())
    return SoftwareFacts(interpreter="recorded", **recorded)


@pytest.mark.parametrize("method", METHODS, ids=[m["method"] for m in METHODS])
def test_sglang_flags_for_each_method_are_sglang_0_5_23s(method: dict[str, object]) -> None:
    engine = get_engine("sglang")
    sw = sglang_0_5_23()
    dep = Deployment.model_validate({"engine": "sglang", "python": "/x/python", "model": "/m", "speculative": method})
    assert dep.speculative is not None
    assert set(engine.speculative_flags(dep.speculative)) <= sw.flags_of(engine)
    assert engine.speculative_method(dep.speculative.method) in sw.speculative_methods_of(engine)
    argv = engine.argv(dep)
    assert argv[argv.index("--speculative-algorithm") + 1] == engine.speculative_method(str(method["method"]))


def test_sglang_chain_and_tree_settings() -> None:
    engine = get_engine("sglang")
    spec = Deployment.model_validate(
        {
            "engine": "sglang",
            "python": "/p",
            "model": "/m",
            "speculative": {"method": "eagle3", "draft": "/d", "tokens": 3},
        }
    ).speculative
    assert spec is not None
    assert engine.speculative_options(spec) == {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/d",
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4,  # a chain verifies the drafted tokens plus the bonus one
    }
    tree = spec.model_copy(update={"topk": 4, "verify": 8})
    assert engine.speculative_options(tree)["speculative-num-draft-tokens"] == 8


@pytest.fixture(scope="module")
def installed_vllm() -> SoftwareFacts:
    if not ENGINE_PY.exists():
        pytest.skip("the engine environment is built by `make engine`")
    from firstlight.facts.software import gather_software_facts

    return gather_software_facts(ENGINE_PY, [get_engine("vllm")])


@pytest.mark.parametrize("method", METHODS, ids=[m["method"] for m in METHODS])
def test_vllm_flags_for_each_method_are_the_installed_vllms(
    installed_vllm: SoftwareFacts, method: dict[str, object]
) -> None:
    engine = get_engine("vllm")
    dep = Deployment.model_validate({"engine": "vllm", "python": str(ENGINE_PY), "model": "/m", "speculative": method})
    assert dep.speculative is not None
    assert engine.speculative_flags(dep.speculative) == ["--speculative-config"]
    assert "--speculative-config" in installed_vllm.flags_of(engine)
    methods = installed_vllm.speculative_methods_of(engine)
    assert len(methods) > 5 and dep.speculative.method in methods
    config = json.loads(engine.argv(dep)[-1])
    assert config["method"] == method["method"] and config["num_speculative_tokens"] == method["tokens"]
    assert config.get("model") == method.get("draft")


def test_a_method_the_engine_lacks_and_mixed_forms_are_refused() -> None:
    with pytest.raises(ValueError, match="topk and verify are SGLang's tree settings"):
        Deployment.model_validate(
            {
                "engine": "vllm",
                "python": "/p",
                "model": "/m",
                "speculative": {"method": "eagle", "draft": "/d", "tokens": 2, "topk": 4},
            }
        )
    with pytest.raises(ValueError, match="say speculative decoding once"):
        Deployment.model_validate(
            {
                "engine": "vllm",
                "python": "/p",
                "model": "/m",
                "args": {"speculative-config": "{}"},
                "speculative": {"method": "ngram", "tokens": 2},
            }
        )
    with pytest.raises(ValueError, match="does not know transformers's speculative-decoding flags"):
        Deployment.model_validate(
            {"engine": "transformers", "python": "/p", "model": "/m", "speculative": {"method": "ngram", "tokens": 2}}
        )
