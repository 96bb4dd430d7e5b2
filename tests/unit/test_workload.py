"""Prompts of exact token counts, counted by the tiny model's own tokenizer (built by `make model`)."""

from __future__ import annotations

import pytest

from firstlight.benchmark.workload import Tokenizer, exact_prompt, synthetic
from tests.conftest import TINY_MODEL


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_dir(TINY_MODEL)
    if tok is None:
        pytest.fail("the tiny model's tokenizer is missing: run `make model` first")
    return tok


@pytest.mark.parametrize("target", [5, 7, 32, 128, 1000])
def test_exact_prompt_has_the_target_count(tokenizer: Tokenizer, target: int) -> None:
    pool = tokenizer.encode("the model serves tokens from weights on eight GPUs " * 300)
    text, count = exact_prompt(tokenizer, pool, 5, target, prefix="17 ")
    assert count == target == len(tokenizer.encode(text))  # counted again from the text itself
    assert text.startswith("17 ")


def test_a_target_below_the_prefix_reports_its_true_count(tokenizer: Tokenizer) -> None:
    """The unique prefix cannot be shortened: the prompt is then longer than asked, and says so."""
    text, count = exact_prompt(tokenizer, tokenizer.encode("the model"), 0, 1, prefix="17 ")
    assert count == len(tokenizer.encode(text)) > 1


def test_synthetic_prompts_are_exact_and_unique(tokenizer: Tokenizer) -> None:
    work = synthetic(40, 64, 16, tokenizer, seed=3)
    assert work.tokenizer.startswith("local ") and work.source == "synthetic"
    assert [p.input_tokens for p in work.prompts] == [64] * 40
    assert all(len(tokenizer.encode(p.text)) == 64 for p in work.prompts)
    assert len({p.text.split(" ", 1)[0] for p in work.prompts}) == 40  # no two share a cached prefix
    assert synthetic(40, 64, 16, tokenizer, seed=3).prompts == work.prompts  # the seed decides
