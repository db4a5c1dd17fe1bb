"""Everything that runs inside ``with dt.capture(model) as g:``: the dispatch mode, the module-call
scope, the recorder and what it asks of autograd, collectives and DTensor."""

from ._capture import OpMode, capture
from ._source import SourceTable, user_site

__all__ = ["OpMode", "SourceTable", "capture", "user_site"]
