"""Per-op capture cost where views are written in place: RNN gate chunks, and a buffer filled column by column.

Run: .venv/bin/python benchmarks/strided.py [--repeat 7] [--steps 8 32 128]

Each workload runs plain, under an empty dispatch mode and under ``dt.capture(saved=False)``,
interleaved, one thread, ``torch.no_grad()``, medians; the row gives the capture's cost per op over
the empty mode (the floor under any tracer), so a row whose cost per op stays flat as the steps grow
shows that exact strided reads and writes (``recording/_region.py``) cost no more with longer runs:

- ``gru``: ``nn.GRU(8, 16, num_layers=2, bidirectional=True)`` with oneDNN off, ``steps`` time steps
  (each cell writes its three gate chunks in place, column blocks of one ``addmm``);
- ``lstmcell``: an ``nn.LSTMCell(8, 16)`` stepped ``steps`` times in a Python loop;
- ``columns``: ``buf[:, t].copy_(h)`` then ``buf[:, t].sum()`` into a ``[64, steps]`` buffer, every
  write strided and disjoint from the others (none is dropped, so each read walks them all: the one
  workload here whose per-op cost grows with its length, as it did with intervals).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt


class _Empty(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        return func(*args, **(kwargs or {}))


def _workloads(steps: int) -> dict[str, Callable[[], object]]:
    torch.manual_seed(0)
    gru, xs = nn.GRU(8, 16, num_layers=2, bidirectional=True), torch.randn(steps, 2, 8)
    cell = nn.LSTMCell(8, 16)

    def run_gru() -> object:
        with torch.backends.mkldnn.flags(enabled=False):
            return gru(xs)

    def run_cell() -> object:
        h = c = torch.zeros(2, 16)
        for x in xs:
            h, c = cell(x, (h, c))
        return h

    def run_columns() -> object:
        buf = torch.zeros(64, steps)
        h = torch.ones(64)
        total = torch.zeros(())
        for t in range(steps):
            buf[:, t].copy_(h)
            total = total + buf[:, t].sum()
        return total

    return {"gru": run_gru, "lstmcell": run_cell, "columns": run_columns}


def _time(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 32, 128])
    opts = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}, median of {opts.repeat}")
    print("| workload | steps | ops | plain ms | empty mode ms | capture ms | capture µs/op over the empty mode |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with torch.no_grad():
        for name in ("gru", "lstmcell", "columns"):
            for steps in opts.steps:
                fn = _workloads(steps)[name]
                with dt.capture(saved=False) as g:
                    fn()
                ops = len(g.ops)

                def empty(fn: Callable[[], object] = fn) -> None:
                    with _Empty():
                        fn()

                def captured(fn: Callable[[], object] = fn) -> None:
                    with dt.capture(saved=False):
                        fn()

                times: dict[str, list[float]] = {"plain": [], "empty": [], "capture": []}
                for _ in range(opts.repeat):
                    for key, run in (("plain", fn), ("empty", empty), ("capture", captured)):
                        times[key].append(_time(run))
                plain, floor, cap = (statistics.median(times[k]) for k in ("plain", "empty", "capture"))
                print(f"| {name} | {steps} | {ops} | {plain * 1e3:.2f} | {floor * 1e3:.2f} | {cap * 1e3:.2f} | "
                      f"{(cap - floor) / ops * 1e6:.1f} |")


if __name__ == "__main__":
    main()
