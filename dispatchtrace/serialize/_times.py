"""A timed capture's op times in a saved file: one optional key, ``times``, a list aligned with ``ops``.

>>> entry = {"timed": True, "times": [1.5e-05, None]}
>>> check_times(entry, 2)
>>> check_times({"timed": True, "times": [1.5e-05, -1.0]}, 2)
Traceback (most recent call last):
...
dispatchtrace.errors.FormatError: times: entry 1 is -1.0, not a number of seconds >= 0 or null
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import FormatError
from ..graph import Graph


def times_entries(graph: Graph) -> dict[str, Any]:
    """``{"timed": true, "times": [seconds or null per op]}`` for a timed capture, ``{}`` otherwise."""
    if not graph.timed:
        return {}
    return {"timed": True, "times": [op.time for op in graph.ops]}


def check_times(data: dict[str, Any], n_ops: int) -> None:
    """``FormatError`` unless ``timed`` is a bool and ``times`` (when there) one number >= 0 or null per op."""
    timed = data.get("timed", False)
    if type(timed) is not bool:
        raise FormatError(f"timed is {timed!r}, not true or false")
    times = data.get("times")
    if times is None:
        return
    if type(times) is not list or len(times) != n_ops:
        raise FormatError(f"times is not a list of one entry per op ({n_ops}): the file was edited; save it again")
    for i, t in enumerate(times):
        if t is not None and (type(t) not in (int, float) or not math.isfinite(t) or t < 0):
            raise FormatError(f"times: entry {i} is {t!r}, not a number of seconds >= 0 or null")


def read_times(graph: Graph, data: dict[str, Any]) -> None:
    """Each op's ``time`` and ``graph.timed`` from the file (checked by ``check_times``)."""
    graph.timed = data.get("timed", False)
    times = data.get("times")
    if times is not None:
        for op, t in zip(graph.ops, times, strict=True):
            op.time = None if t is None else float(t)
