"""The interconnects a spec or a cluster may name (NVLink generations, xGMI, PCIe, InfiniBand, RoCE), each with its source."""

from __future__ import annotations

import difflib

from ..errors import SpecError
from ._builtin import BUILT_IN
from ._link import Link

# Bandwidth is per rank and direction: what one GPU can push into this level at once. Latency is one step
# of a ring or tree across this level under NCCL's Simple protocol (tuning.cc's hwLat: NVLink 3.4 us, PCI
# 5.7 us, NET 14 us; the LL protocols pay a share of it: hardware/_collective.py). The links of the built-in
# devices are declared once, with their datasheets, in _builtin.py; the names here point at them, and the
# three interconnects no built-in device has are declared here.
LINKS: dict[str, Link] = {
    "nvlink3": BUILT_IN["a100-80gb"].intra_node,
    "nvlink4": BUILT_IN["h100-sxm"].intra_node,
    "nvlink5": BUILT_IN["b200"].intra_node,
    "xgmi": BUILT_IN["mi300x"].intra_node,
    "pcie4": BUILT_IN["l4"].intra_node,
    "pcie5": BUILT_IN["h100-pcie"].intra_node,
    "ib-hdr": BUILT_IN["a100-80gb"].inter_node,
    "ib-ndr": BUILT_IN["h100-sxm"].inter_node,
    "ib-xdr": Link(name="800 Gb/s XDR InfiniBand", bandwidth=100e9, latency=14e-6,
                   source="one 800 Gb/s XDR InfiniBand NIC per GPU: 100 GB/s each way; latency: NCCL tuning.cc hwLat (NET)"),
    "roce-400": Link(name="400 Gb/s RoCE", bandwidth=50e9, latency=14e-6,
                     source="RoCE v2, one 400 Gb/s Ethernet NIC per GPU: 50 GB/s each way; latency: NCCL tuning.cc hwLat (NET)"),
    "eth-100": Link(name="100 Gb/s Ethernet (TCP)", bandwidth=12.5e9, latency=30e-6,
                    source="100 Gb/s Ethernet per node, TCP (a cloud instance without RDMA): 12.5 GB/s each way; "
                           "the latency is our assumption, not NCCL's"),
}
"""Interconnects by name (``link_of``, ``Graph.estimate(intra_node=..., inter_node=...)``)."""

assert all(link is not None for link in LINKS.values())  # every built-in device named above has its links


def link_of(name: str | Link) -> Link:
    """The built-in interconnect of that name (a ``Link`` passes through); an unknown name is a ``SpecError``.

    >>> link_of("ib-ndr").bandwidth
    50000000000.0
    >>> link_of("infiniband-ndr")
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.SpecError: unknown interconnect 'infiniband-ndr'; did you mean 'ib-ndr'? (known: nvlink3, nvlink4, nvlink5, xgmi, pcie4, pcie5, ib-hdr, ib-ndr, ib-xdr, roce-400, eth-100; or give a Link(bandwidth=..., latency=...))
    """
    if isinstance(name, Link):
        return name
    found = LINKS.get(str(name).lower())
    if found is not None:
        return found
    close = difflib.get_close_matches(str(name).lower(), LINKS, n=1, cutoff=0.4)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise SpecError(f"unknown interconnect {name!r}{hint} (known: {', '.join(LINKS)}; "
                    "or give a Link(bandwidth=..., latency=...))")
