"""``Graph.lint()``: every invariant the docs promise, checked; ``LintError`` names the first broken."""

from ._lint import LintError, lint

__all__ = ["LintError", "lint"]
