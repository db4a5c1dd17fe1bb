"""What a capture can be run as again: ``g.to_fx`` (an ATen-only ``torch.fx.GraphModule``) and
``dt.verify`` (replay, compare, name the first op that differs, put the model back)."""

from ._fx import Constants, ReplayError, to_fx
from ._verify import verify

__all__ = ["Constants", "ReplayError", "to_fx", "verify"]
