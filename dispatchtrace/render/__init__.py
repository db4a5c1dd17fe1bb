"""Renderers: text, DOT, files, through one registry of formats. Only this layer imports graphviz or writes files."""

from .errors import DotFailedError, DotNotFoundError
from .estimate import DiagramTooLargeError

__all__ = ["DiagramTooLargeError", "DotFailedError", "DotNotFoundError"]
