"""A damaged file never loads as a wrong picture: every field of every kind, given a value of another
type, is a ``FormatError``; one given another value of its type loads as a graph that lints, or is one."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.serialize import FormatError, dumps, from_json


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)).chunk(3, dim=1)[1]


def _saved() -> dict[str, Any]:
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(2, 4)
    with dt.capture(net) as g:
        net(x).sum().backward()
        torch.optim.SGD(net.parameters(), lr=0.1).step()
    return json.loads(dumps(g))


SKIP = ("args", "kwargs", "returned", "arguments", "values", "context")
"""Recorded values (any JSON value is some argument); their tags are checked where they are read."""


def _fields(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every leaf field of a saved file, by path; of each table, its first rows and its last."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in SKIP:
                continue
            yield from _fields(v, (*path, k))
    elif isinstance(value, list):
        picks = range(len(value)) if len(value) <= 4 else [0, 1, 2, len(value) - 1]
        for i in picks:
            if len(path) >= 2 and path[-1] in ("shape",) and i > 0:
                break
            yield from _fields(value[i], (*path, i))
        if path:
            yield path, value
    elif path:
        yield path, value


def _put(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    at = out
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return out


OTHER = ["abc", 1.5, -1, True, [], {}, ["abc"], None]


def _same_kind(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if type(a) in (int, bool) or type(b) in (int, bool):
        return type(a) is type(b)
    return type(a) is type(b)


def _cases() -> list[tuple[tuple[Any, ...], Any]]:
    data = _saved()
    out = []
    for path, original in _fields(data):
        if path[0] in ("format", "version", "dispatchtrace", "torch"):
            continue  # said in the message that refuses the file, tested in test_serialize
        for other in OTHER:
            if not _same_kind(other, original):
                out.append((path, other))
    return out


CASES = _cases()


def test_there_are_damages_of_every_table() -> None:
    assert {p[0] for p, _ in CASES} >= {"tensors", "calls", "ops", "sources", "saved", "params", "inputs",
                                         "outputs", "complete", "error"}
    assert len(CASES) > 400


@pytest.mark.parametrize("table", ["tensors", "calls", "ops", "sources", "saved", "params", "other"])
def test_a_field_of_another_type_is_a_format_error(table: str) -> None:
    data = _saved()
    tables = {"tensors", "calls", "ops", "sources", "saved", "params"}
    mine = [(p, v) for p, v in CASES if (p[0] == table if table != "other" else p[0] not in tables)]
    loaded_wrong: list[str] = []
    for path, other in mine:
        damaged = _put(data, path, other)
        try:
            g = from_json(damaged)
        except FormatError:
            continue
        # a null where the field may be null, or a value the graph means the same by: it must still be a graph
        g.lint()
        str(g.tree(phase="all"))
        if other is not None:
            loaded_wrong.append(f"{'.'.join(map(str, path))} = {other!r}")
    assert not loaded_wrong, f"{len(loaded_wrong)} damaged files loaded: " + "; ".join(loaded_wrong[:12])


def test_a_shape_that_is_a_string_is_refused_with_what_a_shape_is() -> None:
    data = _saved()
    with pytest.raises(FormatError, match=r"tensor row 0: shape is 'abc', not a list of sizes"):
        from_json(_put(data, ("tensors", 0, 1), "abc"))


def test_an_unknown_dtype_or_kind_is_refused() -> None:
    data = _saved()
    with pytest.raises(FormatError, match="dtype is 'flaot32'"):
        from_json(_put(data, ("tensors", 0, 2), "flaot32"))
    with pytest.raises(FormatError, match="kind is 'weights'"):
        from_json(_put(data, ("tensors", 0, 7), "weights"))
