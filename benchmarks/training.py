"""Training steps: a 7B Llama-style step captured on meta, and capture overhead on a CPU ResNet-50 step.

Run: .venv/bin/python benchmarks/training.py [--seq 2048] [--layers 32] [--repeat 5] [--skip-resnet]

1. The model of ``examples/llama_meta.py`` on ``meta``: forward, cross-entropy loss, backward and an
   AdamW step (``foreach=False``, ``capturable=True``: the default path reads the step count with
   ``.item()``, which a meta tensor cannot answer, and the capturable path's device check is told
   that ``meta`` is fine: ``torch.optim.adam._get_capturable_supported_devices`` patched here), captured in one block. Prints the capture time, the
   peak RSS of the process, the step's FLOPs against ``FlopCounterMode``'s and, per decoder layer, the
   forward FLOPs, backward FLOPs and saved-activation bytes (``g.summary()``).
2. ResNet-50 on CPU, batch 8 at 224x224, SGD: a plain training step against the same step inside
   ``dt.capture``, interleaved pairs, medians, ``torch.set_num_threads(1)``; the load average is printed.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from llama_meta import Config, Llama, peak_rss_mb  # noqa: E402

import dispatchtrace as dt  # noqa: E402
from dispatchtrace.views._summary import human  # noqa: E402


def llama_step(seq: int, layers: int) -> None:
    rss_start = peak_rss_mb()
    with torch.device("meta"):
        model = Llama(Config(layers=layers))
    import torch.optim.adam as adam

    supported = adam._get_capturable_supported_devices
    adam._get_capturable_supported_devices = lambda *a, **k: [*supported(*a, **k), "meta"]  # type: ignore[attr-defined]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, capturable=True)
    tokens = torch.zeros(1, seq, dtype=torch.int64, device="meta")

    def step() -> None:
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()

    t0 = time.perf_counter()
    with dt.capture(model, source=False) as g:
        step()
    t_capture = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = g.summary(phase="all")
    t_summary = time.perf_counter() - t0
    rss = peak_rss_mb()
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    ref = counter.get_total_flops()
    phases: dict[str, int] = {}
    for op in g.ops:
        phases[op.phase] = phases.get(op.phase, 0) + 1
    print(f"## 7B Llama-style training step on meta: 1 x {seq} tokens, {layers} layers\n")
    print("| measure | value |\n|---|---:|")
    print(f"| ops captured | {len(g.ops):,} ({', '.join(f'{k} {v:,}' for k, v in phases.items())}) |")
    print(f"| FLOPs (dispatchtrace, every phase) | {s.total.flops:,} ({human(s.total.flops, 'FLOPs')}) |")
    print(f"| FLOPs (FlopCounterMode) | {ref:,} ({'equal' if ref == s.total.flops else 'DIFFERENT'}) |")
    print(f"| forward / backward FLOPs | {human(s.total.forward_flops, 'FLOPs')} / {human(s.total.backward_flops, 'FLOPs')} |")
    print(f"| saved for backward | {human(s.total.saved, 'B')} |")
    print(f"| capture (forward, loss, backward, AdamW step) | {t_capture:.2f} s |")
    print(f"| summary with the training columns | {t_summary:.2f} s |")
    print(f"| peak RSS (whole process) | {rss:.0f} MB (after imports: {rss_start:.0f} MB) |\n")
    print("| layer | forward FLOPs | backward FLOPs | saved |\n|---|---:|---:|---:|")
    for r in s:
        if r.depth == 1 or r.type in ("Embedding", "Linear", "RMSNorm") and r.depth == 0:
            print(f"| {r.label} | {human(r.forward_flops, 'FLOPs')} | {human(r.backward_flops, 'FLOPs')} | {human(r.saved, 'B')} |")
    print()


def resnet_overhead(repeat: int) -> None:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 3, 224, 224), torch.randint(0, 1000, (8,))
    n_ops = 0

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    def captured() -> None:
        nonlocal n_ops
        with dt.capture(model) as g:
            step()
        n_ops = len(g.ops)

    step(), captured()
    times: dict[str, list[float]] = {"plain": [], "capture": []}
    for _ in range(repeat):
        for name, fn in (("plain", step), ("capture", captured)):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    plain, cap = (statistics.median(times[k]) for k in ("plain", "capture"))
    print("## Capture overhead on a CPU training step: ResNet-50, batch 8, 224x224, SGD\n")
    print(f"torch.set_num_threads(1), {repeat} interleaved pairs, medians; load average before: {LOAD}\n")
    print("| ops | plain step | captured step | ratio | µs per op |\n|---:|---:|---:|---:|---:|")
    print(f"| {n_ops:,} | {plain * 1e3:.0f} ms | {cap * 1e3:.0f} ms | {cap / plain:.2f}x | {(cap - plain) / n_ops * 1e6:.0f} |\n")


LOAD = " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-resnet", action="store_true")
    p.add_argument("--skip-llama", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {LOAD}\n")
    if not args.skip_llama:
        llama_step(args.seq, args.layers)
    if not args.skip_resnet:
        resnet_overhead(args.repeat)


if __name__ == "__main__":
    main()
