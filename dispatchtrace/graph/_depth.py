"""How deep a view opens the module calls: one ``Depth`` type and one validator for every view.

The same value means the same thing in ``collapse``, ``tree``, ``to_dot``, ``render``, ``summary``
and the CLI's ``--depth`` (the model's own call is depth 0, its children 1, ...):

- an int ``N >= 0``: the calls at depth ``N`` are shown closed (one node, one line), nothing
  deeper is shown; a call that calls no other module is closed at any depth.
- ``"all"``: every module call is shown open down to the leaf calls, whose ops are not listed.
- ``"ops"``: every op is shown (``collapse``: nothing is collapsed; ``tree``: every call is open
  and its ops are listed).
- ``"auto"``: the deepest int depth whose output stays readable: at most ``AUTO_TREE_LINES`` (150)
  lines in a tree, ``AUTO_DIAGRAM_NODES`` (150) nodes in a diagram (``max_nodes=`` changes it),
  ``AUTO_VIEWER_BOXES`` (30) boxes open at first in the viewer; depth 0 when none fits, and the ops
  when the capture saw no module call.

Each view keeps its own default (``collapse``: ``"ops"``; ``tree`` and ``summary``: ``"all"``;
``to_dot`` and ``render``: ``"auto"``). The summary has one row per call and no op rows, so there
``"ops"`` and ``"auto"`` list every call, as ``"all"``.

>>> check_depth(2), check_depth("auto")
(2, 'auto')
>>> check_depth(None)
Traceback (most recent call last):
...
ValueError: depth must be an int >= 0 (the model's call is 0, its children 1, ...), 'auto', 'ops' or 'all'; got None
"""

from __future__ import annotations

from typing import Literal, TypeGuard

Depth = int | Literal["auto", "ops", "all"]
"""A call depth (the model's call is 0) or one of the named depths; see the module docstring."""

NAMED: tuple[str, ...] = ("auto", "ops", "all")
"""The named depths, in the order error messages list them."""

AUTO_TREE_LINES = 150
"""``"auto"`` in a tree (``g.tree``, ``.txt``): the most lines it may have at the chosen depth."""

AUTO_DIAGRAM_NODES = 150
"""``"auto"`` in a diagram (``to_dot``, the images; ``max_nodes=``'s default): the most nodes at the chosen depth."""

AUTO_VIEWER_BOXES = 30
"""``"auto"`` in the viewer (``.html``): the most boxes it opens at first (by the diagrams' rule)."""

ACCEPTED = "an int >= 0 (the model's call is 0, its children 1, ...), 'auto', 'ops' or 'all'"


def is_depth(value: object) -> TypeGuard[Depth]:
    """Whether ``value`` is a ``Depth`` (``True`` and ``1.5`` are not)."""
    if isinstance(value, str):
        return value in NAMED
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_depth(value: object) -> Depth:
    """``value`` when it is a ``Depth``, else a ``ValueError`` naming the accepted values."""
    if not is_depth(value):
        raise ValueError(f"depth must be {ACCEPTED}; got {value!r}")
    return value
