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

    >>> from dispatchtrace.source import Source
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

    An op's statement is its source. A sub-call's statement is the line that called it, which
    the capture records as the call's ``source``. A capture saved before calls had sources has
    only its ops' sources; then it is the source of the call's first op issued outside the
    call's own code, known when the sub-call runs only library code on the way to its first op
    (``nn.Conv2d``: the op's first user frame is the caller's line) and unknown for a
    user-defined module (every op's source lies in its own ``forward``, recognised by the class
    name in the qualified function name), which then stays ungrouped. Such a guessed statement
    counts only in the code of the enclosing call: its class's methods, or functions its own
    ops were issued from. A statement equal to the line that called the enclosing call itself
    (all items of a library module such as ``nn.Sequential`` share it) groups nothing.
    """

    def __init__(self) -> None:
        self._site: dict[Call, Any] = {}
        self._code: dict[Call, frozenset[tuple[str, str]]] = {}

    def of(self, item: Call | Op, parent: Call) -> Any:
        """The statement ``item`` belongs to inside ``parent``, or ``None``."""
        if isinstance(item, Op):
            src = item.source
        else:
            src = self.site(item)
            if src is not None and item.source is None and not self._in_code(src, parent):
                src = None
        if src is None or key(src) == key(self.site(parent)):
            return None
        return src

    def site(self, call: Call) -> Any:
        """The line that called ``call``, or ``None`` when it cannot be told (see the class docstring)."""
        if call.parent is None:
            return None
        if call in self._site:
            return self._site[call]
        found = call.source  # recorded by the capture (with its default source=True)
        if found is None:  # a capture saved before calls had sources: its ops' sources still tell
            for op in call.all_ops():
                src = op.source
                if src is not None and owner(op, src.function, call) is None:
                    found = src
                    break
        self._site[call] = found
        return found

    def _in_code(self, src: Any, parent: Call) -> bool:
        if owner_class(src.function) == parent.type:
            return True
        code = self._code.get(parent)
        if code is None:
            code = self._code[parent] = frozenset(
                (c.source.file, c.source.function) for c in parent.children if isinstance(c, Op) and c.source is not None)
        return (src.file, src.function) in code


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


def runs(keys: list[Any], sizes: list[int], outer: Any = None, loose: list[bool] | None = None) -> list[tuple[bool, range]]:
    """Consecutive positions with one key (not ``None``, not ``outer``) holding 2 items or more.

    Each run is ``(grouped, positions)``; positions that group nothing come one by one. A
    ``loose`` position (a sub-call that ran no ops, such as ``Dropout`` in eval mode: its line is
    unknown) joins the run around it when the positions on both sides share a key.

    >>> runs(["a", "a", None, "b", "c", "c"], [1, 1, 1, 1, 1, 1], outer="c")
    [(True, range(0, 2)), (False, range(2, 3)), (False, range(3, 4)), (False, range(4, 5)), (False, range(5, 6))]
    >>> runs(["a", None, "a"], [1, 1, 1], loose=[False, True, False])
    [(True, range(0, 3))]
    >>> runs(["a"], [2])   # one parallel block of two items
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
