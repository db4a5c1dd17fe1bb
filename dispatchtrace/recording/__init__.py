"""Everything that runs inside ``with dt.capture(model) as g:``: the dispatch mode, the module-call
scope, the recorder and what it asks of autograd, collectives and DTensor."""

from ._capture import VALUES, OpMode, Values, capture
from ._keep import KEEP_BYTES, Keep
from ._source import SourceTable, user_site
from ._stats import EXTRAS, Extra, fingerprint_of, stats_of

__all__ = ["EXTRAS", "KEEP_BYTES", "VALUES", "Extra", "Keep", "OpMode", "SourceTable", "Values", "capture", "fingerprint_of",
           "stats_of", "user_site"]
