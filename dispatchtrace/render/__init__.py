"""Renderers: text, DOT, files, through one registry of formats. Only this layer imports graphviz or writes files."""

from ..errors import DotFailedError, DotNotFoundError
from ._chakra import TIMELINES, groups_json, per_rank
from ._dot import Layout, Rankdir, to_dot
from ._estimate import DiagramTooLargeError
from ._files import render, write_diff, write_ranks
from ._formats import for_path, help_text, option_names, suffixes
from ._notebook import mimebundle
from ._options import DotOptions, RenderOptions

__all__ = ["TIMELINES", "DiagramTooLargeError", "DotFailedError", "DotNotFoundError", "DotOptions", "Layout", "RenderOptions",
           "Rankdir", "for_path", "groups_json", "help_text", "mimebundle", "option_names", "per_rank", "render", "suffixes",
           "to_dot", "write_diff", "write_ranks"]
