"""The errors of drawing with graphviz's ``dot`` (no graphviz import, so ``dispatchtrace`` exports them cheaply)."""

from __future__ import annotations


class DotNotFoundError(RuntimeError):
    """graphviz's ``dot`` program is not installed (or not on ``PATH``)."""


class DotFailedError(RuntimeError):
    """``dot`` ran but could not lay out or write the diagram."""
