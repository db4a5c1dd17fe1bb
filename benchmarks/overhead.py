"""Capture overhead: plain forward vs an empty TorchDispatchMode vs dispatchtrace.capture.

Run: .venv/bin/python benchmarks/overhead.py [--repeat 7] [--markdown]
One process, torch.set_num_threads(1), medians; ratios are taken within this run. Variants run
interleaved, each after gc.collect(), so none pays for another's garbage (a capture's graph is
freed by the cyclic collector: its ops and calls point at each other).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn as nn
import torchvision
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt


class EmptyMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _models() -> dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]]:
    def encoder() -> nn.Module:
        layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
        return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)

    return {
        "resnet50": (torchvision.models.resnet50, (1, 3, 224, 224)),
        "vit_b_16": (torchvision.models.vit_b_16, (1, 3, 224, 224)),
        "transformer_encoder_12x512": (encoder, (1, 128, 512)),
    }


def measure(name: str, device: str, repeat: int) -> dict[str, object]:
    build, shape = _models()[name]
    with torch.device(device):
        model = build().eval()
        x = torch.randn(shape)
    n_ops = 0

    def plain() -> None:
        model(x)

    def empty() -> None:
        with EmptyMode():
            model(x)

    def cap(source: bool) -> Callable[[], None]:
        def run() -> None:
            nonlocal n_ops
            with dt.capture(model, source=source) as g:
                model(x)
            n_ops = len(g.ops)
        return run

    with torch.no_grad():
        # interleave so drift hits every variant alike
        rows = {k: [] for k in ("plain", "empty", "capture", "capture_nosrc")}
        fns = {"plain": plain, "empty": empty, "capture": cap(True), "capture_nosrc": cap(False)}
        for fn in fns.values():
            fn()
        for _ in range(repeat):
            for k, fn in fns.items():
                gc.collect()  # start every run from a clean heap: no run pays for another's garbage
                t0 = time.perf_counter()
                fn()
                rows[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {
        "model": name, "device": device, "ops": n_ops,
        "plain_ms": med["plain"] * 1e3, "empty_ms": med["empty"] * 1e3,
        "capture_ms": med["capture"] * 1e3, "capture_nosrc_ms": med["capture_nosrc"] * 1e3,
        "empty_ratio": med["empty"] / med["plain"], "capture_ratio": med["capture"] / med["plain"],
        "nosrc_ratio": med["capture_nosrc"] / med["plain"],
        "us_per_op_over_empty": (med["capture"] - med["empty"]) / n_ops * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--models", nargs="*", default=list(_models()))
    parser.add_argument("--devices", nargs="*", default=["cpu", "meta"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, median of {args.repeat}\n")
    print("| model | device | ops | plain ms | empty mode | capture | capture, source=False | µs/op over empty |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for device in args.devices:
        for name in args.models:
            r = measure(name, device, args.repeat)
            print(
                f"| {r['model']} | {r['device']} | {r['ops']} | {r['plain_ms']:.1f} | "
                f"{r['empty_ratio']:.2f}x | {r['capture_ratio']:.2f}x | {r['nosrc_ratio']:.2f}x | "
                f"{r['us_per_op_over_empty']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
