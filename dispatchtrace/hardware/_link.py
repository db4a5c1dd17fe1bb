"""One level of interconnect between accelerators: its bandwidth and latency, and where the numbers come from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One level of interconnect (NVLink inside a node, InfiniBand or RoCE between nodes).

    ``bandwidth`` is the bytes per second one rank can send in one direction over this level
    (NVLink 4 on an H100 SXM: 450e9 of its 900 GB/s bidirectional; a 400 Gb/s NIC per GPU:
    50e9); ``latency`` the seconds one message takes end to end before any byte counts (the
    alpha of an alpha-beta model); ``name`` what it is, ``source`` where the numbers come from.

    >>> nvlink = Link(name="NVLink 4", bandwidth=450e9, latency=3e-6)
    >>> nvlink.seconds(450e6)   # one hop of 450 MB: latency plus bytes over bandwidth
    0.001003
    >>> Link(bandwidth=0, latency=1e-6)
    Traceback (most recent call last):
    ...
    ValueError: Link bandwidth must be a positive number of bytes per second, not 0
    """

    bandwidth: float
    latency: float
    name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.bandwidth, (int, float)) or not self.bandwidth > 0:
            raise ValueError(f"Link bandwidth must be a positive number of bytes per second, not {self.bandwidth!r}")
        if not isinstance(self.latency, (int, float)) or not self.latency >= 0:
            raise ValueError(f"Link latency must be a number of seconds >= 0, not {self.latency!r}")

    def seconds(self, nbytes: float) -> float:
        """The time of one message of ``nbytes`` over this link: ``latency + nbytes / bandwidth``."""
        return round(self.latency + nbytes / self.bandwidth, 12)
