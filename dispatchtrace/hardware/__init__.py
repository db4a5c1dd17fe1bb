"""What a device and the links between devices can do: the numbers estimates are made from (a leaf layer: imports no other)."""

from ._collective import KINDS, PROTOCOLS, CollectiveCost, Protocol, collective_cost, nodes_of
from ._link import Link
from ._links import LINKS, link_of

__all__ = ["KINDS", "LINKS", "PROTOCOLS", "CollectiveCost", "Link", "Protocol", "collective_cost", "link_of", "nodes_of"]
