"""What a device and the links between devices can do: the numbers estimates are made from (a leaf layer: imports no other)."""

from ._builtin import BUILT_IN
from ._efficiency import OP_CLASSES, Efficiency
from ._link import Link
from ._spec import DTYPES, DeviceSpec, spec_of

__all__ = ["BUILT_IN", "DTYPES", "OP_CLASSES", "DeviceSpec", "Efficiency", "Link", "spec_of"]
