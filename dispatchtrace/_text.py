"""Text that stays one line: an exception as its first line, lists shortened with a count, counts in SI units.

>>> shapes(["f32[3]"] * 100)
'100 × f32[3]'
>>> shapes(["f32[2]", "f32[2]", "i64[2]"])
'f32[2], f32[2], i64[2]'
>>> shapes(["f32[1]", "f32[2]", "f32[3]", "f32[4]", "f32[5]", "f32[6]"])
'f32[1], f32[2], f32[3], f32[4], … +2'
>>> items(["%a", "%b", "%c", "%d", "%e", "%f", "%g", "%h", "%i"])
'%a, %b, %c, %d, %e, %f, … +3'
"""

from __future__ import annotations

from collections.abc import Sequence

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
LIMIT = 4
"""How many entries (or runs of equal entries) a shortened list shows before its count."""


def shapes(labels: Sequence[str], *, limit: int = LIMIT) -> str:
    """Tensor labels joined with ``, ``; a run of equal ones as ``N × label``, and past ``limit``
    entries the first ones and ``… +K`` (K: the tensors left out)."""
    runs: list[tuple[str, int]] = []
    for label in labels:
        if runs and runs[-1][0] == label:
            runs[-1] = (label, runs[-1][1] + 1)
        else:
            runs.append((label, 1))
    if len(labels) <= limit:
        return ", ".join(labels)
    shown = [label if n == 1 else f"{n} × {label}" for label, n in runs[:limit]]
    rest = sum(n for _, n in runs[limit:])
    return ", ".join(shown) + (f", … +{rest}" if rest else "")


def items(texts: Sequence[str], *, limit: int = 6) -> str:
    """Texts joined with ``, ``; past ``limit`` the first ones and ``… +K``."""
    if len(texts) <= limit:
        return ", ".join(texts)
    return ", ".join(texts[:limit]) + f", … +{len(texts) - limit}"


def first_line(error: BaseException) -> str:
    """The first non-empty line of ``str(error)``, stripped; ``""`` when the message is empty.

    >>> first_line(ValueError("\\n  bad shape  \\n(more detail)"))
    'bad shape'
    >>> first_line(KeyError())
    ''
    """
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


def one_line(error: BaseException) -> str:
    """``TypeName: first line`` (just ``TypeName`` when the message is empty).

    >>> one_line(RuntimeError("shapes differ\\nat op 3"))
    'RuntimeError: shapes differ'
    >>> one_line(StopIteration())
    'StopIteration'
    """
    text = first_line(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def human(n: int | None, unit: str = "") -> str:
    """A count in SI units with two or three significant digits; ``None`` is ``-``.

    >>> human(4_089_184_256, "FLOPs"), human(98_000_000, "B"), human(512, "B"), human(None)
    ('4.1 GFLOPs', '98 MB', '512 B', '-')
    >>> human(25_557_032)
    '25.6 M'
    """
    if n is None:
        return "-"
    value, i = float(n), 0
    while abs(value) >= 999.5 and i < len(_PREFIXES) - 1:
        value /= 1000
        i += 1
    if i == 0:
        text = str(n)
    elif abs(value) < 10 or (abs(value) < 100 and unit == ""):
        text = f"{value:.1f}"
    else:
        text = f"{value:.0f}"
    return f"{text} {_PREFIXES[i]}{unit}".rstrip()
