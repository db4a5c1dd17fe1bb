"""What a device and the links between devices can do: the numbers estimates are made from (a leaf layer: imports no other)."""

from ._link import Link

__all__ = ["Link"]
