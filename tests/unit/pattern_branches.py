"""Texts that a regex matches, one per way through it, built from its parse tree: every alternative at every level
(up to a cap), each repeat at its minimum (and once, where the minimum is nought), a class by its first member, a
word boundary as a space. Tests use them to hold every branch of a signature to the prefilter."""

from __future__ import annotations

import itertools

try:  # Python 3.11+
    import re._constants as sre
    import re._parser as sre_parser
except ImportError:  # Python 3.10
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse as sre_parser  # type: ignore[no-redef]

CAP = 256  # ways through one pattern, at most
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT} | ({sre.POSSESSIVE_REPEAT} if hasattr(sre, "POSSESSIVE_REPEAT") else set())
_CATEGORY_CHAR = {sre.CATEGORY_DIGIT: "1", sre.CATEGORY_SPACE: " ", sre.CATEGORY_WORD: "a"}


def branch_samples(pattern: str) -> list[str]:
    return _texts(list(sre_parser.parse(pattern)))


def _texts(items) -> list[str]:
    """Every text the sequence of parsed items may produce (capped), as the product of each item's texts."""
    out = [""]
    for op, av in items:
        options = _item(op, av)
        if options:
            out = [a + b for a, b in itertools.islice(itertools.product(out, options), CAP)]
    return out


def _item(op, av) -> list[str]:
    if op is sre.LITERAL:
        return [chr(av)]
    if op is sre.NOT_LITERAL:
        return ["y" if chr(av) == "x" else "x"]
    if op is sre.ANY:
        return ["x"]
    if op is sre.IN:
        return [_member(av)]
    if op is sre.SUBPATTERN:
        return _texts(list(av[-1]))
    if op is sre.BRANCH:
        return [t for branch in av[1] for t in _texts(list(branch))][:CAP]
    if op in _REPEATS:
        low, _, sub = av
        once = _texts(list(sub))
        return ([""] if low == 0 else []) + [t * max(low, 1) for t in once]
    if hasattr(sre, "ATOMIC_GROUP") and op is sre.ATOMIC_GROUP:
        return _texts(list(av))
    if op is sre.AT and av is sre.AT_BOUNDARY:
        return [" "]  # a word boundary holds between two words
    return []  # other anchors, lookarounds and back-references add no text


def _member(av) -> str:
    op, arg = av[0]
    if op is sre.LITERAL:
        return chr(arg)
    if op is sre.RANGE:
        return chr(arg[0])
    if op is sre.CATEGORY:
        return _CATEGORY_CHAR.get(arg, "a")
    return "a"
