"""Which statement of a forward issued each item of a call: the grouping behind ``tree(statements=True)``."""

from __future__ import annotations

import io
import os
import tokenize
from typing import Any

from ..graph import Call, Op

#: a statement's identity: file, line and function of its source
Key = tuple[str, int, str]


def key(source: Any) -> Key | None:
    """``(file, line, function)`` of a ``Source`` (or a loaded stand-in), or ``None``."""
    return None if source is None else (source.file, source.line, source.function)


def owner_class(function: str) -> str | None:
    """The class a function is defined in, from its qualified name; ``None`` for a plain function.

    >>> owner_class("Block.forward"), owner_class("Block.forward.<locals>.f"), owner_class("helper")
    ('Block', 'Block', None)
    """
    head, dot, _ = function.partition(".")
    return head if dot and not head.startswith("<") else None


def where(source: Any) -> str:
    """``models.py:30``."""
    return f"{os.path.basename(source.file)}:{source.line}"


def label(source: Any) -> str:
    """The statement's text without a trailing comment, or where it is when the text could not be read.

    >>> from dispatchtrace.graph import Source
    >>> label(Source("net.py", 3, "Net.forward", "y = f(x, '#')  # noqa: T484"))
    "y = f(x, '#')"
    """
    return _code(source.text) or f"{where(source)} in {source.function}"


def _code(text: str) -> str:
    if "#" not in text:
        return text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                return text[:tok.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement
        pass
    return text


class Statements:
    """The statement each sibling item (a sub-call or an op) of a call belongs to, cached per call.

    An op's statement is its source; a sub-call's statement is the line that called it, which
    the capture records as the call's ``source``. A statement equal to the line that called the
    enclosing call itself (all items of a library module such as ``nn.Sequential`` share it)
    groups nothing.
    """

    def of(self, item: Call | Op, parent: Call) -> Any:
        """The statement ``item`` belongs to inside ``parent``, or ``None``."""
        src = item.source if isinstance(item, Op) else self.site(item)
        if src is None or key(src) == key(self.site(parent)):
            return None
        return src

    def site(self, call: Call) -> Any:
        """The line that called ``call``; ``None`` for the capture's root or when it was not recorded."""
        return None if call.parent is None else call.source


def owner(op: Op, function: str, call: Call) -> Call | None:
    """The innermost call from ``op``'s up to ``call`` whose class defines ``function``, or ``None``."""
    cls = owner_class(function)
    if cls is None:
        return None
    c: Call | None = op.call
    while c is not None:
        if c.type == cls:
            return c
        if c is call:
            return None
        c = c.parent
    return None


def statement_runs(keys: list[Any], sizes: list[int], outer: Any = None, loose: list[bool] | None = None) -> list[tuple[bool, range]]:
    """Consecutive positions with one key (not ``None``, not ``outer``) holding 2 items or more.

    Each run is ``(grouped, positions)``; positions that group nothing come one by one. A
    ``loose`` position (a sub-call that ran no ops, such as ``Dropout`` in eval mode: its line is
    unknown) joins the run around it when the positions on both sides share a key.

    >>> statement_runs(["a", "a", None, "b", "c", "c"], [1, 1, 1, 1, 1, 1], outer="c")
    [(True, range(0, 2)), (False, range(2, 3)), (False, range(3, 4)), (False, range(4, 5)), (False, range(5, 6))]
    >>> statement_runs(["a", None, "a"], [1, 1, 1], loose=[False, True, False])
    [(True, range(0, 3))]
    >>> statement_runs(["a"], [2])   # one parallel block of two items
    [(True, range(0, 1))]
    """
    if loose is not None and any(loose):
        keys = list(keys)
        known = [i for i in range(len(keys)) if not loose[i]]
        for lo, hi in zip(known, known[1:], strict=False):
            if hi - lo > 1 and keys[lo] is not None and keys[lo] == keys[hi]:
                keys[lo + 1:hi] = [keys[lo]] * (hi - lo - 1)
    out: list[tuple[bool, range]] = []
    i = 0
    while i < len(keys):
        k, n, j = keys[i], sizes[i], i + 1
        if k is not None and k != outer:
            while j < len(keys) and keys[j] == k:
                n, j = n + sizes[j], j + 1
        if n >= 2 and k is not None and k != outer:
            out.append((True, range(i, j)))
        else:
            out.extend((False, range(p, p + 1)) for p in range(i, j))
        i = j
    return out
