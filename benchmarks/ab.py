"""A/B of two dispatchtrace revisions in one process: capture cost per op, and save + load + summary.

Run: .venv/bin/python benchmarks/ab.py BASE_REV [--repeat 7] [--io LAYERS] ROW...

``BASE_REV`` (a git revision of this repository) is exported with ``git archive`` into a temporary
directory as the package ``dtbase``; the working tree's ``dispatchtrace`` is the other side. ROW is
``model:device`` as in ``overhead.py`` (``resnet50:meta``) or ``decoder:LAYERS``. Interleaved per
repeat: empty mode → base → this tree, each after ``gc.collect()``, medians, one thread. Prints µs/op
over the empty mode for both and Python function calls per op (``sys.setprofile`` call and c_call
events over the empty mode's), which do not depend on the machine's load. ``--io LAYERS`` also times
``save`` + ``load`` + ``summary`` of the loaded graph of that decoder, both revisions side by side, and
Python calls per op of ``save`` and of ``load`` alone.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import overhead
import torch

ROOT = Path(__file__).resolve().parent.parent


def baseline(rev: str, into: str) -> ModuleType:
    """``rev``'s ``dispatchtrace`` package, imported as ``dtbase`` from ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "dispatchtrace"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    os.rename(os.path.join(into, "dispatchtrace"), os.path.join(into, "dtbase"))
    sys.path.insert(0, into)
    import dtbase  # noqa: PLC0415 - only importable once exported

    return dtbase


def calls(fn: Callable[[], Any]) -> int:
    """Python function calls (and C calls) made by ``fn()``."""
    n = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def row_model(row: str) -> tuple[torch.nn.Module, torch.Tensor]:
    name, arg = row.split(":")
    if name == "decoder":
        return overhead.decoder(int(arg))
    return overhead.model_input(name, arg)


def capture_row(row: str, packages: dict[str, ModuleType], repeat: int) -> str:
    model, x = row_model(row)

    def captured(pkg: ModuleType) -> Callable[[], Any]:
        def run() -> Any:
            with pkg.capture(model) as g:
                model(x)
            return g
        return run

    fns = {"empty": overhead.variants(model, x)["empty"], **{k: captured(p) for k, p in packages.items()}}
    with torch.no_grad():
        n = len(fns["new"]().ops)
        med = overhead.interleaved(fns, repeat)
        counts = {k: calls(f) for k, f in fns.items()}
    parts = [f"{row:22s} ops {n} empty {med['empty'] * 1e3:.1f} ms"]
    for k in packages:
        us = (med[k] - med["empty"]) / n * 1e6
        parts.append(f"{k} {us:6.1f} µs/op, {(counts[k] - counts['empty']) / n:.1f} calls/op")
    return " | ".join(parts)


def io_row(layers: int, packages: dict[str, ModuleType], repeat: int) -> str:
    model, x = overhead.decoder(layers)
    graphs = {}
    with torch.no_grad():
        for k, pkg in packages.items():
            with pkg.capture(model) as g:
                model(x)
            graphs[k] = g
    times: dict[str, list[float]] = {k: [] for k in packages}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            for k, pkg in packages.items():
                path = os.path.join(tmp, f"{k}.json")
                gc.collect()
                t0 = time.perf_counter()
                graphs[k].save(path)
                pkg.load(path).summary()
                times[k].append(time.perf_counter() - t0)
        counts = {}
        for k, pkg in packages.items():
            path = os.path.join(tmp, f"{k}.json")
            n = len(graphs[k].ops)
            save = calls(lambda g=graphs[k], p=path: g.save(p)) / n
            load = calls(lambda pkg=pkg, p=path: pkg.load(p)) / n
            counts[k] = f"save {save:.1f}, load {load:.1f} calls/op"
    return f"decoder {layers} layers, save + load + summary: " + " | ".join(
        f"{k} {statistics.median(v):.3f} s ({counts[k]})" for k, v in times.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the git revision to compare with (exported as the package dtbase)")
    parser.add_argument("rows", nargs="*", default=["resnet50:meta", "decoder:8"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--io", type=int, default=0, help="decoder layers for the save + load + summary A/B")
    args = parser.parse_intermixed_args()
    overhead.configure()
    import dispatchtrace as new  # noqa: PLC0415 - after configure, like overhead.py's own import

    with tempfile.TemporaryDirectory() as tmp:
        packages = {"base": baseline(args.base, tmp), "new": new}
        print(f"base {args.base}, new {Path(new.__file__).parent}, load average {overhead.loadavg()}")
        for row in args.rows:
            print(capture_row(row, packages, args.repeat), flush=True)
        if args.io:
            print(io_row(args.io, packages, max(3, args.repeat // 2)), flush=True)
        print(f"load average after: {overhead.loadavg()}")


if __name__ == "__main__":
    main()
