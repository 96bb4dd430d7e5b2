"""One text per top-level branch of a regex, built from its parse tree: the shortest each branch matches, taking the
first choice of every inner alternation and class. Tests use it to hold every branch of a signature to the prefilter."""

from __future__ import annotations

try:  # Python 3.11+
    import re._constants as c
    import re._parser as parser
except ImportError:  # Python 3.10
    import sre_constants as c  # type: ignore[no-redef]
    import sre_parse as parser  # type: ignore[no-redef]

_REPEATS = {c.MAX_REPEAT, c.MIN_REPEAT} | ({c.POSSESSIVE_REPEAT} if hasattr(c, "POSSESSIVE_REPEAT") else set())
_CATEGORY_CHAR = {c.CATEGORY_DIGIT: "1", c.CATEGORY_SPACE: " ", c.CATEGORY_WORD: "a"}


def branch_samples(pattern: str) -> list[str]:
    items = list(parser.parse(pattern))
    while len(items) == 1 and items[0][0] is c.SUBPATTERN:  # a group around the whole pattern
        items = list(items[0][1][-1])
    if len(items) == 1 and items[0][0] is c.BRANCH:
        return [_text(branch) for branch in items[0][1][1]]
    return [_text(items)]


def _text(items) -> str:
    out = []
    for op, av in items:
        if op is c.LITERAL:
            out.append(chr(av))
        elif op is c.NOT_LITERAL or op is c.ANY:
            out.append("x" if op is c.ANY or chr(av) != "x" else "y")
        elif op is c.IN:
            out.append(_member(av))
        elif op is c.SUBPATTERN:
            out.append(_text(av[-1]))
        elif op is c.BRANCH:
            out.append(_text(av[1][0]))
        elif op in _REPEATS:
            low, _, sub = av
            out.append(_text(sub) * low)
        elif hasattr(c, "ATOMIC_GROUP") and op is c.ATOMIC_GROUP:
            out.append(_text(av))
    return "".join(out)  # anchors, lookarounds and back-references add no text


def _member(av) -> str:
    op, arg = av[0]
    if op is c.LITERAL:
        return chr(arg)
    if op is c.RANGE:
        return chr(arg[0])
    if op is c.CATEGORY:
        return _CATEGORY_CHAR.get(arg, "a")
    return "a"
