"""``keep=``: full copies of chosen ops' results and calls' outputs, detached, on the CPU, within a byte budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import Any, Union

import torch

from .._structure import tensor_leaves
from .._torch import disable_current_modes, has_values
from ..errors import KeepBudgetError
from ..graph import Call, Op, TensorRef

Tensor = torch.Tensor
Keep = Union[str, Sequence[str], Callable[[Union[Op, Call]], bool], None]  # noqa: UP007 - a runtime alias (3.10)
"""What ``capture(keep=...)`` takes: a glob matched against op targets and names (``aten.relu*``,
``convolution_3``) and call paths and labels (``layer1.*``, ``relu#2``), a list of them, or a predicate
given each op (as it is recorded) and each call (as it returns)."""

KEEP_BYTES = 1 << 30
"""``keep_bytes``' default: 1 GiB of copies."""


_TAKES = ("keep= takes a glob (a str) matched against op targets and names (aten.addmm*, convolution_3) and call "
          "paths and labels (layer1.*, relu#2), a list of them, or a predicate given each op and call")


def check_keep(keep: Keep, keep_bytes: int) -> None:
    """Refuse, at capture start, a ``keep=`` that is not a glob, a list of globs or a predicate, and a
    negative ``keep_bytes``.

    >>> check_keep(42, KEEP_BYTES)
    Traceback (most recent call last):
    ...
    TypeError: keep=42 is an int: keep= takes a glob (a str) matched against op targets and names (aten.addmm*, convolution_3) and call paths and labels (layer1.*, relu#2), a list of them, or a predicate given each op and call
    >>> check_keep("aten.addmm*", -1)
    Traceback (most recent call last):
    ...
    ValueError: keep_bytes=-1: the budget of the copies keep= makes is a number of bytes >= 0 (default 1 GiB, 1 << 30)
    """
    _matcher(keep)
    if isinstance(keep_bytes, bool) or not isinstance(keep_bytes, (int, float)) or not keep_bytes >= 0:
        raise ValueError(f"keep_bytes={keep_bytes!r}: the budget of the copies keep= makes is a number of bytes >= 0 "
                         f"(default 1 GiB, 1 << 30)")


def _matcher(keep: Keep) -> Callable[[Op | Call], bool]:
    if callable(keep):
        return lambda x: bool(keep(x))  # type: ignore[operator]
    if keep is not None and not isinstance(keep, (str, list, tuple, set, frozenset)):
        raise TypeError(f"keep={keep!r} is {'an' if type(keep).__name__[0] in 'aeiou' else 'a'} {type(keep).__name__}: {_TAKES}")
    patterns = [keep] if isinstance(keep, str) else list(keep or ())
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"keep= holds {type(p).__name__} {p!r}: {_TAKES}")

    def match(x: Op | Call) -> bool:
        if isinstance(x, Op):
            return any(fnmatchcase(x.target, p) or fnmatchcase(x.name, p) for p in patterns)
        return any(fnmatchcase(x.path, p) or fnmatchcase(x.label, p) for p in patterns)

    return match


class Keeper:
    """Copies the matching values into ``kept`` (by ref id); ``KeepBudgetError`` before a copy that would pass
    ``budget`` bytes."""

    def __init__(self, keep: Keep, budget: int, kept: dict[int, Tensor]) -> None:
        self._match = _matcher(keep)
        self._keep = keep
        self.budget = budget
        self.kept = kept
        self.bytes = 0
        self.matched = 0
        self.without_values = 0

    def op(self, op: Op, out: Any) -> None:
        if self._match(op):
            self.matched += 1
            self._take(op.outputs, (out,) if isinstance(out, Tensor) else tensor_leaves(out), op.name)

    def call(self, call: Call, refs: Sequence[TensorRef], tensors: Sequence[Tensor]) -> None:
        if self._match(call):
            self.matched += 1
            self._take(refs, tensors, call.label)

    def _take(self, refs: Sequence[TensorRef], tensors: Sequence[Tensor], where: str) -> None:
        for ref, t in zip(refs, tensors, strict=False):
            if ref.id in self.kept or ref.shape != tuple(t.shape):
                continue
            if not has_values(t):
                self.without_values += 1
                continue
            size = t.numel() * t.element_size()
            if self.bytes + size > self.budget:
                raise KeepBudgetError(
                    f"keeping {ref.text} of {where} ({ref.shape_text}, {size:,} bytes) would bring the values kept to "
                    f"{self.bytes + size:,} bytes, past keep_bytes={self.budget:,}; narrow keep= (now {self._keep!r}) "
                    f"or pass a larger keep_bytes=")
            with disable_current_modes(), torch.no_grad():
                self.kept[ref.id] = t.detach().to("cpu", copy=True)
            self.bytes += size

    def notes(self) -> list[str]:
        """What to tell the user at the end: a ``keep=`` that matched nothing, values meta tensors lack."""
        out = []
        if not self.matched:
            out.append(f"keep={self._keep!r} matched no op and no call: nothing was kept (globs match op targets and "
                       f"names, aten.relu* or convolution_3, and call paths and labels, layer1.* or relu#2)")
        if self.without_values:
            out.append(f"keep= matched {self.without_values} tensors without values (meta or fake): none of them was kept")
        return out
