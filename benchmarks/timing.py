"""Measured time: what ``dt.capture(timing=True)`` costs over the capture without it, and what its total covers.

Run: .venv/bin/python benchmarks/timing.py [--repeat 9] [--device cpu|cuda] [--threads 1]

ResNet-50, eval, ``torch.no_grad()``, 1 x 3 x 224 x 224 on the CPU with one thread (``--device cuda``: on the
GPU, timed with CUDA events): a plain forward, ``dt.capture(model)`` and ``dt.capture(model, timing=True)``,
interleaved, medians (``overhead.interleaved``). The issue's bound: timing at most 1.1x the capture without it.
Then the timed capture's own total (``g.time``, the sum of the ops' times) against the plain forward's wall
time: the share of a forward its kernels take (the rest is Python, module calls and dispatch), and the
median spread of one op's time across the runs (how steady a per-op number is on this machine).
"""

from __future__ import annotations

import argparse
import statistics

import overhead
import torch
import torchvision

import dispatchtrace as dt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().to(a.device)
    x = torch.randn(1, 3, 224, 224, device=a.device)
    graphs: list[dt.Graph] = []

    def plain() -> None:
        model(x)

    def capture() -> None:
        with dt.capture(model):
            model(x)

    def timed() -> None:
        with dt.capture(model, timing=True) as g:
            model(x)
        graphs.append(g)

    with torch.no_grad():
        times = overhead.interleaved({"plain": plain, "capture": capture, "timed": timed}, a.repeat)
    base = times["plain"]
    print(f"resnet50 {a.device}, {a.threads} thread(s), {a.repeat} runs each, load average {overhead.loadavg()}")
    for name, label in (("plain", "plain forward"), ("capture", "dt.capture"), ("timed", "dt.capture(timing=True)")):
        print(f"  {label:<26} {times[name] * 1e3:8.1f} ms  {times[name] / base:5.2f}x plain")
    print(f"  timing / capture: {times['timed'] / times['capture']:.3f}x (the bound: 1.1x)")
    totals = [g.time for g in graphs[1:]]  # the warm-up run left out
    print(f"  g.time (the ops' own times): median {statistics.median(totals) * 1e3:.1f} ms, "
          f"{statistics.median(totals) / base:.0%} of the plain forward")
    per_op = list(zip(*[[op.time for op in g.ops] for g in graphs[1:]], strict=True))
    spread = statistics.median((max(ts) - min(ts)) / statistics.median(ts) for ts in per_op if statistics.median(ts) > 0)
    print(f"  one op's time across the runs: median spread (max - min) / median {spread:.0%}, {len(per_op)} ops")
    top = sorted(graphs[-1].calls, key=lambda c: c.time or 0.0, reverse=True)
    print("  largest calls of the last run: " + ", ".join(f"{c.label} {dt.views.seconds(c.time)}" for c in top[:4]))
    small(a.repeat, a.device)


def small(repeat: int, device: str) -> None:
    """The worst case for timing's own cost: many tiny ops (a 12-layer decoder at width 32, 16 tokens), where
    the kernels take microseconds and the per-op work of the capture and the clock is most of a forward."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerDecoder(layer, 12).eval().to(device)
    x = torch.randn(1, 16, 32, device=device)

    def capture() -> None:
        with dt.capture(model):
            model(x, x)

    def timed() -> None:
        with dt.capture(model, timing=True) as g:
            model(x, x)
        timed.ops = len(g.ops)  # type: ignore[attr-defined]

    with torch.no_grad():
        times = overhead.interleaved({"plain": lambda: model(x, x), "capture": capture, "timed": timed}, repeat)
    n = timed.ops  # type: ignore[attr-defined]
    print(f"decoder, 12 layers at width 32 ({n} ops), {device}: plain {times['plain'] * 1e3:.1f} ms, capture "
          f"{times['capture'] * 1e3:.1f} ms, timed {times['timed'] * 1e3:.1f} ms: timing / capture "
          f"{times['timed'] / times['capture']:.3f}x, {(times['timed'] - times['capture']) / n * 1e6:+.1f} µs per op")


if __name__ == "__main__":
    main()
