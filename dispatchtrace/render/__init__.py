"""Renderers: text, DOT, files. Only this layer imports graphviz or writes files."""

from .files import DotFailedError, DotNotFoundError

__all__ = ["DotFailedError", "DotNotFoundError"]
