"""Renderers: text, DOT, files. Only this layer imports graphviz or writes files."""

from .estimate import DiagramTooLargeError
from .files import DotFailedError, DotNotFoundError

__all__ = ["DiagramTooLargeError", "DotFailedError", "DotNotFoundError"]
