"""What a device and the links between devices can do: the numbers estimates are made from (a leaf layer: imports no other)."""

from ._builtin import BUILT_IN
from ._collective import KINDS, PROTOCOLS, CollectiveCost, Protocol, collective_cost, nodes_of
from ._efficiency import OP_CLASSES, Efficiency
from ._fresh import FreshOutput
from ._link import Link
from ._links import LINKS, link_of
from ._spec import DTYPES, DeviceSpec, spec_of

__all__ = ["BUILT_IN", "DTYPES", "KINDS", "LINKS", "OP_CLASSES", "PROTOCOLS", "CollectiveCost", "DeviceSpec", "Efficiency",
           "FreshOutput",
           "Link", "Protocol", "collective_cost", "link_of", "nodes_of", "spec_of"]
