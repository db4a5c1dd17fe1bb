"""Did-you-mean: the names closest to a mistyped one, with the letters that pass for digits (o/0, l/1) read alike."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from difflib import SequenceMatcher

_ALIKE = str.maketrans("ol", "01")


def close_matches(word: str, names: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``n`` names most like ``word``, best first: ``difflib``'s ratio with case ignored and ``o``/``0``,
    ``l``/``1`` read alike, ties broken by the ratio as typed, then by name.

    >>> close_matches("efficientnet_bo", ["efficientnet_b8", "efficientnet_b7", "efficientnet_b0", "efficientnet_b1"])
    ['efficientnet_b0', 'efficientnet_b1', 'efficientnet_b7']
    >>> close_matches("resnet5", ["resnet50", "resnet18", "vgg11"], n=1)
    ['resnet50']
    >>> close_matches("xyz", ["resnet50"])
    []
    """
    key = word.lower().translate(_ALIKE)
    matcher = SequenceMatcher(autojunk=False)
    matcher.set_seq2(key)
    raw = SequenceMatcher(autojunk=False)
    raw.set_seq2(word)
    scored = []
    for name in names:
        matcher.set_seq1(name.lower().translate(_ALIKE))
        if matcher.real_quick_ratio() < cutoff or matcher.quick_ratio() < cutoff:
            continue
        score = matcher.ratio()
        if score >= cutoff:
            raw.set_seq1(name)
            scored.append((score, raw.ratio(), name))
    best = heapq.nsmallest(n, scored, key=lambda s: (-s[0], -s[1], s[2]))
    return [name for _, _, name in best]
