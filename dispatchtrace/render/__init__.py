"""Renderers: text, DOT, files, through one registry of formats. Only this layer imports graphviz or writes files."""

from .errors import DotFailedError, DotNotFoundError

__all__ = ["DotFailedError", "DotNotFoundError"]
