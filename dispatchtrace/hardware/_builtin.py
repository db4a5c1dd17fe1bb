"""The built-in device specs, each number with its source: vendors' datasheets, dense rates only."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from ..errors import SpecError
from ._efficiency import Efficiency
from ._link import Link
from ._spec import DeviceSpec

T = 1e12
GiB = 2**30  # the datasheets' "80GB" of HBM is 80 GiB: an H100 SXM reports 81559 MiB

A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021, nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), SXM column"
H100 = "NVIDIA H100 Tensor Core GPU datasheet (2022) and H100 Tensor Core GPU Architecture whitepaper (2022, table 1)"
H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column"
B200 = ("NVIDIA HGX B200 specifications (nvidia.com/data-center/hgx, 2024): the 8-GPU totals / 8; "
        "DGX B200 datasheet (2024): 1,440 GB of HBM3e for 8 GPUs")
MI300X = "AMD Instinct MI300X Accelerator data sheet (2023)"
L4 = "NVIDIA L4 Tensor Core GPU datasheet (2023)"
SPARSE = "the table's 2:4-sparsity figure (marked *) / 2"

LAUNCH = ("stated, not a datasheet figure: ~5 us per eager op (PyTorch dispatch + cudaLaunchKernel; NVIDIA's "
          "'Getting Started with CUDA Graphs' blog, 2019, measures a few us per back-to-back launch); "
          "measure this machine's with dispatchtrace calibrate")
NCCL_LAT = "NCCL src/graph/tuning.cc hwLat, Simple protocol, ring (as torch/_inductor/comm_analysis.py copies it)"
CURVES = ("stated model, not measured: fraction = top * x / (x + x_half) per op class, x_half = the size the "
          "op would take {t} us to run at the peak (matmul top 0.8: large cuBLAS GEMMs reach 70-80% of the dense "
          "peak; convolution 0.65; attention: FlashAttention-2's 50-73% of A100's peak, 35% of H100's, "
          "FlashAttention-3's 75% on H100)")
MEMORY_CURVES = ("stated model, not measured: fraction = top * bytes / (bytes + b_half), b_half = 1.5 us at the "
                 "bandwidth (3 us for reductions); top {top} for copies and elementwise ops (STREAM-like kernels "
                 "reach 80-90% of HBM bandwidth), 0.8 of that for reductions and pooling")


def _curves(peak: float, bandwidth: float, *, matmul: float = 0.8, attention: float = 0.5,
            memory: float = 0.9) -> tuple[dict[str, Efficiency], dict[str, Efficiency]]:
    """The compute and memory efficiency curves of a GPU from its bf16 peak and its bandwidth."""
    compute = {
        "matmul": Efficiency.saturating(matmul, peak * 2.5e-6),
        "convolution": Efficiency.saturating(0.65 * matmul / 0.8, peak * 4e-6),
        "attention": Efficiency.saturating(attention, peak * 5e-6),
        "other": Efficiency.saturating(0.5, peak * 2.5e-6),
    }
    memory_curves = {
        "copy": Efficiency.saturating(memory, bandwidth * 1.5e-6),
        "elementwise": Efficiency.saturating(memory, bandwidth * 1.5e-6),
        "reduction": Efficiency.saturating(0.8 * memory, bandwidth * 3e-6),
        "pooling": Efficiency.saturating(0.8 * memory, bandwidth * 3e-6),
        "matmul": Efficiency.saturating(0.85 * memory, bandwidth * 1.5e-6),
        "convolution": Efficiency.saturating(0.8 * memory, bandwidth * 1.5e-6),
        "attention": Efficiency.saturating(0.8 * memory, bandwidth * 1.5e-6),
        "other": Efficiency.saturating(0.7 * memory, bandwidth * 1.5e-6),
    }
    return compute, memory_curves


def _spec(name: str, title: str, peaks: Mapping[str, float], bandwidth: float, memory: float, *, datasheet: str,
          intra: Link, inter: Link, notes: Mapping[str, str], matmul: float = 0.8, attention: float = 0.5,
          memory_top: float = 0.9, launch: float = 5e-6) -> DeviceSpec:
    compute, memory_curves = _curves(peaks["bfloat16"], bandwidth, matmul=matmul, attention=attention, memory=memory_top)
    sources = {"peak_flops": datasheet, "memory_bandwidth": datasheet, "memory": datasheet, "launch_overhead": LAUNCH,
               "compute_efficiency": CURVES.format(t="2.5 (matmul), 4 (convolution), 5 (attention)")
               + f"; here matmul top {matmul}, attention top {attention}",
               "memory_efficiency": MEMORY_CURVES.format(top=memory_top),
               "intra_node": intra.source, "inter_node": inter.source, **notes}
    return DeviceSpec(name=name, title=title, peak_flops=peaks, memory_bandwidth=bandwidth, launch_overhead=launch,
                      compute_efficiency=compute, memory_efficiency=memory_curves, memory=memory,
                      intra_node=intra, inter_node=inter, ranks_per_node=8, sources=sources)


def _nvlink(generation: int, per_direction: float, datasheet: str) -> Link:
    total = f"{per_direction * 2 / 1e9:g} GB/s"
    return Link(name=f"NVLink {generation}", bandwidth=per_direction, latency=3.4e-6,
                source=f"{datasheet}: NVLink {total} per GPU, both directions together, half each way; "
                       f"latency: {NCCL_LAT}")


def _nic(gbit: int, kind: str, where: str) -> Link:
    return Link(name=f"{gbit} Gb/s {kind}", bandwidth=gbit / 8 * 1e9, latency=14e-6,
                source=f"{where}: one {gbit} Gb/s {kind} NIC per GPU; latency: {NCCL_LAT}")


_A100_PEAKS = {"float64": 19.5 * T, "float32": 19.5 * T, "tfloat32": 156 * T, "bfloat16": 312 * T,
               "float16": 312 * T, "int8": 624 * T}
_A100_NOTES = {"peak_flops.float64": "FP64 Tensor Core 19.5 TFLOP/s (cuBLAS DGEMM runs on it; 9.7 without)",
               "peak_flops.tfloat32": "TF32 Tensor Core 156 dense (312 with sparsity)"}
_DGX_A100 = "NVIDIA DGX A100 datasheet (2020): 8 ConnectX-6 200 Gb/s HDR InfiniBand for the compute fabric"
_H100_SXM_PEAKS = {"float64": 66.9 * T, "float32": 66.9 * T, "tfloat32": 494.7 * T, "bfloat16": 989.4 * T,
                   "float16": 989.4 * T, "float8_e4m3fn": 1978.9 * T, "float8_e5m2": 1978.9 * T, "int8": 1978.9 * T}
_HOPPER_NOTES = {"peak_flops.float64": "FP64 Tensor Core (cuBLAS DGEMM runs on it; plain FP64 is half)",
                 "peak_flops.bfloat16": f"BF16 Tensor Core dense: {SPARSE}",
                 "peak_flops.tfloat32": f"TF32 Tensor Core dense: {SPARSE}",
                 "peak_flops.float8_e4m3fn": f"FP8 Tensor Core dense: {SPARSE}"}
_DGX_H100 = "NVIDIA DGX H100 datasheet (2023): 8 ConnectX-7 400 Gb/s NDR InfiniBand for the compute fabric"

BUILT_IN: dict[str, DeviceSpec] = {
    "a100-40gb": _spec(
        "a100-40gb", "NVIDIA A100 SXM4 40GB", _A100_PEAKS, 1555e9, 40 * GiB, datasheet=A100 + " (40GB: 1,555 GB/s)",
        intra=_nvlink(3, 300e9, A100), inter=_nic(200, "HDR InfiniBand", _DGX_A100), notes=_A100_NOTES,
        attention=0.65),
    "a100-80gb": _spec(
        "a100-80gb", "NVIDIA A100 SXM4 80GB", _A100_PEAKS, 2039e9, 80 * GiB, datasheet=A100 + " (80GB SXM: 2,039 GB/s)",
        intra=_nvlink(3, 300e9, A100), inter=_nic(200, "HDR InfiniBand", _DGX_A100), notes=_A100_NOTES,
        attention=0.65),
    "h100-sxm": _spec(
        "h100-sxm", "NVIDIA H100 SXM5 80GB", _H100_SXM_PEAKS, 3.35e12, 80 * GiB, datasheet=H100 + ", H100 SXM column",
        intra=_nvlink(4, 450e9, H100), inter=_nic(400, "NDR InfiniBand", _DGX_H100), notes=_HOPPER_NOTES),
    "h100-pcie": _spec(
        "h100-pcie", "NVIDIA H100 PCIe 80GB",
        {"float64": 51.2 * T, "float32": 51.2 * T, "tfloat32": 378 * T, "bfloat16": 756 * T, "float16": 756 * T,
         "float8_e4m3fn": 1513 * T, "float8_e5m2": 1513 * T, "int8": 1513 * T},
        2.0e12, 80 * GiB, datasheet=H100 + ", H100 PCIe column (HBM2e, 2 TB/s)",
        intra=Link(name="PCIe Gen5 x16", bandwidth=64e9, latency=5.7e-6,
                   source=f"{H100}: PCIe Gen5 128 GB/s both directions (an NVLink bridge joins pairs only); "
                          f"latency: {NCCL_LAT} (PCI)"),
        inter=_nic(200, "InfiniBand or Ethernet", "assumed (PCIe servers vary)"), notes=_HOPPER_NOTES),
    "h200": _spec(
        "h200", "NVIDIA H200 SXM 141GB", _H100_SXM_PEAKS, 4.8e12, 141 * GiB,
        datasheet=H200 + " (compute as H100 SXM; 141 GB HBM3e at 4.8 TB/s)",
        intra=_nvlink(4, 450e9, H200), inter=_nic(400, "NDR InfiniBand", "NVIDIA DGX H200 datasheet (2024): "
                                                   "8 ConnectX-7 400 Gb/s NDR InfiniBand"), notes=_HOPPER_NOTES),
    "b200": _spec(
        "b200", "NVIDIA B200 (HGX B200, per GPU)",
        {"float64": 37 * T, "float32": 75 * T, "tfloat32": 1125 * T, "bfloat16": 2250 * T, "float16": 2250 * T,
         "float8_e4m3fn": 4500 * T, "float8_e5m2": 4500 * T, "int8": 4500 * T},
        8e12, 180 * GiB, datasheet=B200,
        intra=_nvlink(5, 900e9, B200), inter=_nic(400, "NDR InfiniBand", "NVIDIA DGX B200 datasheet (2024): "
                                                  "8 ConnectX-7 400 Gb/s"),
        notes={"peak_flops.bfloat16": f"HGX B200 FP16/BF16 36 PFLOP/s for 8 GPUs with sparsity: {SPARSE} / 8",
               "peak_flops.float64": "HGX B200 FP64 and FP64 Tensor Core 296 TFLOP/s for 8 GPUs / 8",
               "peak_flops.float32": "HGX B200 FP32 600 TFLOP/s for 8 GPUs / 8",
               "memory_bandwidth": "8 TB/s per B200 as NVIDIA states it (not re-checked against the HGX table here)",
               "memory": "DGX B200: 1,440 GB for 8 GPUs (180 GB each; the B200 part has 192 GB)"}),
    "mi300x": _spec(
        "mi300x", "AMD Instinct MI300X 192GB",
        {"float64": 163.4 * T, "float32": 163.4 * T, "tfloat32": 653.7 * T, "bfloat16": 1307.4 * T,
         "float16": 1307.4 * T, "float8_e4m3fnuz": 2614.9 * T, "float8_e5m2fnuz": 2614.9 * T, "int8": 2614.9 * T},
        5.3e12, 192 * GiB, datasheet=MI300X,
        intra=Link(name="Infinity Fabric (7 links)", bandwidth=448e9, latency=3.4e-6,
                   source=f"{MI300X}: 7 Infinity Fabric links of 128 GB/s (both directions together) = 448 GB/s "
                          "per direction to all peers (64 GB/s to any one peer); latency assumed as NVLink's"),
        inter=_nic(400, "InfiniBand or RoCE", "assumed (MI300X platforms pair a 400 Gb/s NIC with each GPU)"),
        matmul=0.5, attention=0.4, memory_top=0.8,
        notes={"peak_flops.float64": "FP64 Matrix 163.4 (FP64 Vector 81.7)",
               "peak_flops.bfloat16": "BF16 dense 1307.4 (2614.9 with sparsity)",
               "compute_efficiency.matmul": "stated: public MI300X BF16 GEMM benchmarks reach about half of the "
                                            "datasheet peak (e.g. SemiAnalysis, MI300X vs H100 vs H200, Dec 2024)",
               "memory_efficiency.copy": "stated: about 80% of the 5.3 TB/s reached by large copies"}),
    "l4": _spec(
        "l4", "NVIDIA L4 24GB",
        {"float64": 0.473 * T, "float32": 30.3 * T, "tfloat32": 60 * T, "bfloat16": 121 * T, "float16": 121 * T,
         "float8_e4m3fn": 242.5 * T, "float8_e5m2": 242.5 * T, "int8": 242.5 * T},
        300e9, 24 * GiB, datasheet=L4 + " (GDDR6, 300 GB/s)",
        intra=Link(name="PCIe Gen4 x16", bandwidth=32e9, latency=5.7e-6,
                   source=f"{L4}: PCIe Gen4 x16 64 GB/s both directions; latency: {NCCL_LAT} (PCI)"),
        inter=Link(name="100 Gb/s Ethernet shared by 8 GPUs", bandwidth=100 / 8 / 8 * 1e9, latency=14e-6,
                   source="assumed: a 100 Gb/s node network (a cloud VM with 8 L4s) shared by its 8 GPUs, "
                          f"12.5 Gb/s each; latency: {NCCL_LAT} (NET)"),
        matmul=0.6, memory_top=0.85,
        notes={"peak_flops.float64": "not in the datasheet: FP32 / 64 (CUDA C++ Programming Guide, arithmetic "
                                     "throughput, compute capability 8.9: 2 FP64 vs 128 FP32 results per clock per SM)",
               "peak_flops.bfloat16": f"BF16 Tensor Core 242 with sparsity: {SPARSE}",
               "compute_efficiency.matmul": "stated: a 72 W part does not hold the boost clock the peak assumes "
                                            "under tensor load; top 0.6 is a guess, calibrate to know"}),
}

ALIASES = {"a100": "a100-80gb", "a100-sxm": "a100-80gb", "a100-40g": "a100-40gb", "a100-80g": "a100-80gb",
           "h100": "h100-sxm", "h100-sxm5": "h100-sxm", "h200-sxm": "h200", "mi300": "mi300x"}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def is_named(name: str) -> bool:
    """Whether ``name`` is a built-in spec's name or alias."""
    key = _key(name)
    return key in BUILT_IN or key in ALIASES


def named(name: str) -> DeviceSpec:
    """The built-in spec ``name`` (any case, ``_`` or ``-``), or a ``SpecError`` with close names."""
    if not isinstance(name, str):
        raise SpecError(f"a built-in device spec is named by a string, not {type(name).__name__}")
    key = _key(name)
    key = ALIASES.get(key, key)
    if key in BUILT_IN:
        return BUILT_IN[key]
    close = difflib.get_close_matches(key, [*BUILT_IN, *ALIASES], n=2, cutoff=0.5)
    close = list(dict.fromkeys(ALIASES.get(c, c) for c in close))
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise SpecError(f"no built-in device spec {name!r}{hint}; the built-ins are {', '.join(BUILT_IN)}, or give a "
                    "path to a spec JSON (dispatchtrace calibrate -o spec.json measures this machine)")
