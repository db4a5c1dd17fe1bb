"""Capture overhead: the empty-mode floor, FlopCounterMode, DebugMode and dispatchtrace side by side.

Run: .venv/bin/python benchmarks/overhead.py [--repeat 11] [--decoder 8 32 64 126] [--rows resnet50:meta ...]
(``--rows resnet50:cuda``: a GPU row, each run synchronized; ``scripts/gpu-check.sh`` runs those.)

One process, torch.set_num_threads(1), eval mode under torch.no_grad(), medians; ratios are taken
within this run. Variants run interleaved (plain -> empty mode -> FlopCounterMode -> DebugMode ->
dispatchtrace), each after gc.collect(), so none pays for another's garbage. The load average is
printed with each table: the machine is shared, compare rows of one run. The encoder runs with the
MHA fast path off, so on cpu it issues its ~700 ATen ops as on meta (not one fused op per layer).
Each table row also gives the median minor page faults per run of plain, FlopCounterMode and
dispatchtrace (memory taken from the system again during the run).

``--decoder`` captures a Llama-style decoder of the 405B shape (hidden 16384, 128/8 heads, SwiGLU
53248, 1 x 2048 tokens) on meta at each layer count: per-op cost over the empty mode, capture time,
``summary`` + ``save`` + ``load``, graph bytes and gc-tracked objects per op (tracemalloc and
``gc.get_objects``, load-independent) and the collector's full collections during one capture.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torchvision
from torch.utils._debug_mode import DebugMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import dispatchtrace as dt

VARIANTS = ("plain", "empty", "flops", "debug", "dispatchtrace")


class EmptyMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "resnet50": (torchvision.models.resnet50, (1, 3, 224, 224)),
    "mobilenet_v3_large": (torchvision.models.mobilenet_v3_large, (1, 3, 224, 224)),
    "vit_b_16": (torchvision.models.vit_b_16, (1, 3, 224, 224)),
    "encoder_12x512": (_encoder, (1, 128, 512)),
}
TABLE = [("resnet50", "cpu"), ("mobilenet_v3_large", "cpu"), ("encoder_12x512", "cpu"),
         ("resnet50", "meta"), ("vit_b_16", "meta"), ("encoder_12x512", "meta")]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def variants(model: nn.Module, x: Any) -> dict[str, Callable[[], Any]]:
    """One callable per variant; ``dispatchtrace`` returns its graph."""
    def plain() -> None:
        model(x)

    def empty() -> None:
        with EmptyMode():
            model(x)

    def flops() -> None:
        with FlopCounterMode(display=False):
            model(x)

    def debug() -> None:
        with DebugMode():
            model(x)

    def capture() -> dt.Graph:
        with dt.capture(model) as g:
            model(x)
        return g

    return dict(zip(VARIANTS, (plain, empty, flops, debug, capture), strict=True))


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int,
                faults: dict[str, float] | None = None) -> dict[str, float]:
    """Median seconds per variant, the variants run in turn ``repeat`` times after one warm-up each;
    ``faults``, when given, gets each variant's median count of minor page faults per run (memory the
    process had to take from the system again: on CPU, a tool that changes the allocator's heap pays it)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    minor: dict[str, list[int]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            gc.collect()
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            fn()
            if torch.cuda.is_initialized():  # a cuda row: the kernels, not only their launches
                torch.cuda.synchronize()
            times[k].append(time.perf_counter() - t0)
            minor[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    if faults is not None:
        faults.update({k: statistics.median(v) for k, v in minor.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def model_input(name: str, device: str) -> tuple[nn.Module, torch.Tensor]:
    """``MODELS[name]`` built in eval mode on ``device``, and its random input."""
    build, shape = MODELS[name]
    with torch.device(device):
        return build().eval(), torch.randn(shape)


def configure() -> None:
    """One thread; the MHA fast path off, so the encoder issues its ~700 ops on cpu too, not one fused op per layer."""
    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)


def table_row(name: str, device: str, repeat: int) -> dict[str, Any]:
    model, x = model_input(name, device)
    with torch.no_grad():
        fns = variants(model, x)
        faults: dict[str, float] = {}
        med = interleaved(fns, repeat, faults)
        n_ops = len(fns["dispatchtrace"]().ops)
    row: dict[str, Any] = {"model": name, "device": device, "ops": n_ops, "plain_ms": med["plain"] * 1e3,
                           "faults": faults}
    for k in VARIANTS[1:]:
        row[k] = med[k] / med["plain"]
        row[f"{k}_us"] = (med[k] - med["empty"]) / n_ops * 1e6
    return row


def print_table(repeat: int, rows: list[tuple[str, str]]) -> None:
    print(f"load average before: {loadavg()}")
    print("| model | device | ops | plain ms | empty mode (floor) | FlopCounterMode | DebugMode | dispatchtrace "
          "| µs/op over floor: FlopCounterMode | DebugMode | dispatchtrace | page faults: plain / FCM / dispatchtrace |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, device in rows:
        r = table_row(name, device, repeat)
        print(f"| {name} | {device} | {r['ops']} | {r['plain_ms']:.1f} | {r['empty']:.2f} | {r['flops']:.2f} | "
              f"{r['debug']:.2f} | {r['dispatchtrace']:.2f} | {r['flops_us']:.1f} | {r['debug_us']:.1f} | "
              f"{r['dispatchtrace_us']:.1f} | {r['faults']['plain']:.0f} / {r['faults']['flops']:.0f} / "
              f"{r['faults']['dispatchtrace']:.0f} |", flush=True)
    print(f"load average after: {loadavg()}\n")


# ---- the decoder at growing depth ----------------------------------------------------------------


def decoder(layers: int) -> tuple[nn.Module, torch.Tensor]:
    """The 405B shape of ``examples/llama_meta.py``'s decoder on meta, ``layers`` deep, and 1 x 2048 tokens."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import llama_meta

    config = llama_meta.Config(vocab=128256, dim=16384, layers=layers, heads=128, kv_heads=8, hidden=53248,
                               max_seq=2048)
    with torch.device("meta"):
        model = llama_meta.Llama(config).eval()
    return model, torch.zeros(1, 2048, dtype=torch.int64, device="meta")


def _full_collections(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the number of generation-2 collections the cyclic collector ran during it."""
    count = 0

    def cb(phase: str, info: dict[str, int]) -> None:
        nonlocal count
        if phase == "start" and info["generation"] == 2:
            count += 1

    gc.callbacks.append(cb)
    try:
        return fn(), count
    finally:
        gc.callbacks.remove(cb)


def _held(fn: Callable[[], Any]) -> tuple[Any, int, int]:
    """``fn()``'s result, the bytes (tracemalloc) and gc-tracked objects it still holds once built."""
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return result, held, len(gc.get_objects()) - objects - 1


def decoder_row(layers: int, repeat: int) -> dict[str, Any]:
    model, x = decoder(layers)
    with torch.no_grad():
        fns = variants(model, x)
        fns = {k: fns[k] for k in ("empty", "dispatchtrace")}
        med = interleaved(fns, repeat)
        g, collections = _full_collections(fns["dispatchtrace"])
        n = len(g.ops)
        del g
        g, held, objects = _held(fns["dispatchtrace"])
    io: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        for _ in range(max(3, repeat // 3)):
            gc.collect()
            t0 = time.perf_counter()
            g.save(path)
            dt.load(path).summary()  # a loaded graph has no costs cached: summary computes them
            io.append(time.perf_counter() - t0)
    return {"layers": layers, "ops": n, "calls": len(g.calls), "capture_s": med["dispatchtrace"],
            "us_per_op": (med["dispatchtrace"] - med["empty"]) / n * 1e6, "io_s": statistics.median(io),
            "bytes_per_op": held / n, "objects_per_op": objects / n, "collections": collections}


def print_decoder(layer_counts: list[int], repeat: int) -> None:
    print(f"load average before: {loadavg()}")
    print("| layers | ops | calls | capture s | µs/op over floor | summary+save+load s | graph bytes/op "
          "| gc objects/op | full collections in a capture |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for layers in layer_counts:
        r = decoder_row(layers, repeat)
        print(f"| {layers} | {r['ops']} | {r['calls']} | {r['capture_s']:.2f} | {r['us_per_op']:.1f} | "
              f"{r['io_s']:.2f} | {r['bytes_per_op']:.0f} | {r['objects_per_op']:.1f} | {r['collections']} |",
              flush=True)
    print(f"load average after: {loadavg()}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--decoder", type=int, nargs="*", default=[8, 32, 64, 126], help="decoder layer counts")
    parser.add_argument("--rows", nargs="*", default=[f"{m}:{d}" for m, d in TABLE],
                        help="table rows as model:device (none: only the decoder)")
    args = parser.parse_args()
    configure()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, median of {args.repeat}, "
          f"dispatchtrace from {Path(dt.__file__).parent}\n")
    if args.rows:
        print_table(args.repeat, [tuple(r.split(":")) for r in args.rows])
    if args.decoder:
        print_decoder(args.decoder, args.repeat)


if __name__ == "__main__":
    main()
