"""The interconnects a spec or a cluster may name (NVLink generations, xGMI, PCIe, InfiniBand, RoCE), each with its source."""

from __future__ import annotations

import difflib

from ..errors import SpecError
from ._link import Link

# Bandwidth is per rank and direction: what one GPU can push into this level at once. Latency is one step
# of a ring or tree across this level under NCCL's Simple protocol, the hardware part of NCCL's per-step
# latency (tuning.cc's hwLat, Simple, ring: NVLink 3.4 us, PCI 5.7 us, NET 14 us; the LL protocols pay a
# share of it: hardware/_collective.py).
LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        Link(name="nvlink3", bandwidth=300e9, latency=3.4e-6,
             source="NVIDIA A100 datasheet (2021): NVLink 600 GB/s bidirectional per GPU, 300 GB/s each way"),
        Link(name="nvlink4", bandwidth=450e9, latency=3.4e-6,
             source="NVIDIA H100 datasheet (2023): NVLink 900 GB/s bidirectional per GPU, 450 GB/s each way"),
        Link(name="nvlink5", bandwidth=900e9, latency=3.4e-6,
             source="NVIDIA HGX B200 datasheet (2024): NVLink 1.8 TB/s bidirectional per GPU, 900 GB/s each way"),
        Link(name="xgmi", bandwidth=448e9, latency=3.4e-6,
             source="AMD Instinct MI300X datasheet (2023): 7 Infinity Fabric links of 128 GB/s bidirectional, "
                    "896 GB/s in all, 448 GB/s each way"),
        Link(name="pcie4", bandwidth=32e9, latency=5.7e-6,
             source="PCI Express 4.0 x16: 64 GB/s bidirectional, 32 GB/s each way"),
        Link(name="pcie5", bandwidth=64e9, latency=5.7e-6,
             source="PCI Express 5.0 x16: 128 GB/s bidirectional, 64 GB/s each way"),
        Link(name="ib-hdr", bandwidth=25e9, latency=14e-6,
             source="InfiniBand HDR, one 200 Gb/s NIC per GPU (DGX A100): 25 GB/s each way"),
        Link(name="ib-ndr", bandwidth=50e9, latency=14e-6,
             source="InfiniBand NDR, one 400 Gb/s NIC per GPU (DGX H100/H200, DGX B200): 50 GB/s each way"),
        Link(name="ib-xdr", bandwidth=100e9, latency=14e-6,
             source="InfiniBand XDR, one 800 Gb/s NIC per GPU: 100 GB/s each way"),
        Link(name="roce-400", bandwidth=50e9, latency=14e-6,
             source="RoCE v2, one 400 Gb/s Ethernet NIC per GPU: 50 GB/s each way"),
        Link(name="eth-100", bandwidth=12.5e9, latency=30e-6,
             source="100 Gb/s Ethernet per node, TCP (a cloud instance without RDMA): 12.5 GB/s each way; "
                    "the latency is our assumption, not NCCL's"),
    )
}


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
