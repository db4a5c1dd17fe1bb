"""Estimated against measured time on this CPU, one thread, in one run: calibrate, a timed capture, the estimate.

Run: .venv/bin/python benchmarks/estimate.py [--device cpu|cuda] [--quick] [--repeat 3] [--rounds 1] [--rows resnet50 vit_b_16 gpt2] [--spec spec.json] [--decoder 64]

1. ``dt.DeviceSpec.calibrate("cpu", threads=1)`` measures this machine (what ``dispatchtrace calibrate`` runs),
   unless ``--spec`` gives a spec file it wrote.
2. Each model runs twice uncaptured (warm-up), then once inside ``dt.capture(model, timing=True)``: every op's
   own wall-clock time (``op.time``).
   Three such captures; each op's least time over them is its measured time (calibrate, too, takes the least).
3. ``g.estimate(spec)`` on that capture; per call that takes at least 3% of the step (measured), the estimated
   and measured seconds and their ratio, then the total. Backward ops count in the forward call they belong to
   (``op.origin``) on both sides.
4. The same ops by ``torch.utils._runtime_estimation``'s formulas with the same calibrated peak and bandwidth
   (compute ``flops / 2 / (0.75 peak)`` by the output dtype for ops in its FLOP registry, transfer ``bytes / bandwidth``
   of every input and output, the larger of the two, nothing for views and creation ops, no launch cost).
5. ``--rounds R``: steps 1-3 R times over in this one process, interleaved (calibrate, then each model's captures,
   then calibrate again ...; each model built and warmed up once), each round's estimate made with its own
   calibration; per call and for the total, the median of the rounds' ratios and their range. A shared machine's
   speed moves by 10-30% over tens of seconds (one calibration, or one model's captures, can fall in a slow
   stretch): the median over rounds is the estimate's accuracy, the range the machine's noise.
6. ``--decoder N``: the seconds ``g.estimate`` takes on the N-layer Llama-405B-shaped decoder on meta
   (``benchmarks/overhead.py``'s; 64 layers is about 12k ops), median of 3.

``--device cuda`` does the same on a GPU (calibrate and the timed captures with CUDA events), for
``scripts/gpu-check.sh`` when a GPU is lent.

Rows: ``resnet50`` (torchvision, weights=None, 1x3x224x224 forward), ``vit_b_16`` (torchvision, 1x3x224x224
forward), ``gpt2`` (transformers GPT-2 small widths, 4 layers, 1x256 tokens: forward, loss, backward, AdamW step).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import dispatchtrace as dt
from dispatchtrace.graph import itemsize

HERE = Path(__file__).resolve().parent
SHARE = 0.03
BAND = 0.2  # a call is within the target when estimated / measured is within 1 +- BAND


def within(ratio: float) -> bool:
    return 1 - BAND <= ratio <= 1 + BAND


def resnet50(device: str) -> tuple[torch.nn.Module, Callable[[], Any]]:
    import torchvision

    model = torchvision.models.resnet50(weights=None).eval().to(device)
    x = torch.randn(1, 3, 224, 224, device=device)

    def run() -> Any:
        with torch.no_grad():
            return model(x)
    return model, run


def vit_b_16(device: str) -> tuple[torch.nn.Module, Callable[[], Any]]:
    import torchvision

    model = torchvision.models.vit_b_16(weights=None).eval().to(device)
    x = torch.randn(1, 3, 224, 224, device=device)

    def run() -> Any:
        with torch.no_grad():
            return model(x)
    return model, run


def gpt2(device: str) -> tuple[torch.nn.Module, Callable[[], Any]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=768, n_head=12, n_positions=256, vocab_size=50257,
                        attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).train().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)  # foreach on CUDA, a loop per parameter on the CPU
    ids = torch.randint(0, config.vocab_size, (1, 256), device=device)

    def run() -> Any:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return model, run


ROWS = {"resnet50": resnet50, "vit_b_16": vit_b_16, "gpt2": gpt2}


def least_times(model: torch.nn.Module, run: Callable[[], Any], repeat: int) -> dt.Graph:
    """``repeat`` timed captures of ``run()``; the last, each op's time set to its least over them (as calibrate
    takes the least of its repeats: the machine's other work only ever slows a timing down)."""
    graphs = []
    for _ in range(repeat):
        with dt.capture(model, timing=True) as g:
            run()
        graphs.append(g)
    last = graphs[-1]
    for other in graphs[:-1]:
        if [op.target for op in other.ops] != [op.target for op in last.ops]:
            continue  # a different op sequence (not expected): keep the last capture's times
        for a, b in zip(last.ops, other.ops, strict=True):
            if a.time is not None and b.time is not None and b.time < a.time:
                a.time = b.time
    return last


def upstream_total(g: dt.Graph, spec: dt.DeviceSpec) -> float:
    """``torch.utils._runtime_estimation``'s roofline over the capture's ops, with ``spec``'s peak and bandwidth."""
    from torch.utils._runtime_estimation import _IGNORE_OPS
    from torch.utils.flop_counter import flop_registry

    from dispatchtrace.graph import overload_of

    costs = g.costs()
    total = 0.0
    for op in g.ops:
        overload = overload_of(op.target)
        if overload is None or overload.overloadpacket in _IGNORE_OPS or op.is_view:
            continue
        compute = 0.0
        if overload.overloadpacket in flop_registry and op.outputs:
            flops = costs.op(op).flops or 0
            peak = spec.peak(op.outputs[0].dtype) or spec.peak("float32") or 1.0
            compute = flops / 2 / (0.75 * peak)
        moved = sum((r.numel or 0) * (itemsize(r.dtype) or 0) for r in (*op.inputs, *op.outputs))
        total += max(compute, moved / spec.memory_bandwidth)
    return total


def row(name: str, spec: dt.DeviceSpec, repeat: int = 3, device: str = "cpu",
        built: tuple[torch.nn.Module, Callable[[], Any]] | None = None) -> dict[str, Any]:
    model, run = built or warmed(name, device)
    g = least_times(model, run, repeat)
    t0 = time.perf_counter()
    est = g.estimate(spec)
    seconds = time.perf_counter() - t0
    measured = est.measured(g.root) or 0.0
    calls = []
    for call in g.calls:
        m = est.measured(call)
        if m is not None and m >= SHARE * measured and call.parent is not g.root:
            calls.append((call, est.time(call), m))
    tops = [c for c in g.calls if c.parent is g.root]
    calls.sort(key=lambda c: -c[2])
    return {"name": name, "ops": len(g.ops), "graph": g, "est": est, "total": est.total, "measured": measured,
            "calls": calls, "upstream": upstream_total(g, spec), "seconds": seconds, "tops": tops}


def warmed(name: str, device: str) -> tuple[torch.nn.Module, Callable[[], Any]]:
    """The model and its run, after two uncaptured runs (warm-up)."""
    model, run = ROWS[name](device)
    for _ in range(2):
        run()
    return model, run


def report_rounds(name: str, rounds: list[dict[str, Any]]) -> None:
    """The median over rounds of each ratio (a call's, the total's), with the rounds' range: ``--rounds``."""
    first = rounds[0]
    labels = [c.label for c in first["graph"].calls]
    for r in rounds[1:]:
        if [c.label for c in r["graph"].calls] != labels:
            raise SystemExit(f"{name}: the rounds' captures differ in their calls; cannot line them up")
    totals = [r["total"] / r["measured"] for r in rounds]
    upstream = [r["upstream"] / r["measured"] for r in rounds]
    measured = statistics.median(r["measured"] for r in rounds)
    rows = []
    for i, call in enumerate(first["graph"].calls):
        if call.parent is first["graph"].root or call is first["graph"].root:
            continue
        pairs = []
        for r in rounds:
            c = r["graph"].calls[i]
            m = r["est"].measured(c)
            if m:
                pairs.append((r["est"].time(c), m))
        if len(pairs) < len(rounds):
            continue
        m = statistics.median(p[1] for p in pairs)
        if m >= SHARE * measured:
            ratios = [e / mm for e, mm in pairs]
            rows.append((call, statistics.median(p[0] for p in pairs), m, ratios))
    rows.sort(key=lambda row: -row[2])
    medians = [statistics.median(ratios) for *_, ratios in rows]
    inside = sum(1 for x in medians if within(x))
    every = [sum(1 for *_, ratios in rows if within(ratios[k])) for k in range(len(rounds))]
    print(f"\n### {name}: {first['ops']} ops, {len(rounds)} rounds\n")
    print(f"total est/meas: median {statistics.median(totals):.3f}, rounds {' '.join(f'{x:.3f}' for x in totals)}; "
          f"measured (median) {measured * 1e3:.2f} ms; torch.utils._runtime_estimation's formulas: median "
          f"{statistics.median(upstream):.3f}")
    def each(key: str) -> str:
        return " ".join(f"{r[key] * 1e3:.1f}" for r in rounds)
    print(f"per round, ms: measured {each('measured')}; estimated {each('total')}")
    print(f"calls >= {SHARE:.0%} of the step: {len(rows)}, median ratio within +-{BAND:.0%}: {inside}"
          + (f", median ratios {min(medians):.2f}-{max(medians):.2f}" if medians else "")
          + f"; within +-{BAND:.0%} in each round: {' '.join(map(str, every))}")
    print("\n| call | share | estimated (median) | measured (median) | est/meas median | rounds' range |\n"
          "|---|---:|---:|---:|---:|---|")
    for (call, e, m, ratios), med in zip(rows, medians, strict=True):
        print(f"| {call.label} | {m / measured:.1%} | {e * 1e3:.3f} ms | {m * 1e3:.3f} ms | {med:.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")


def report(r: dict[str, Any]) -> None:
    est, total, measured = r["est"], r["total"], r["measured"]
    ratios = [e / m for _, e, m in r["calls"]]
    inside = sum(1 for x in ratios if within(x))
    print(f"\n### {r['name']}: {r['ops']} ops, estimate {r['seconds'] * 1e3:.0f} ms to compute\n")
    print(f"total: estimated {total * 1e3:.2f} ms, measured {measured * 1e3:.2f} ms, ratio {total / measured:.3f}; "
          f"torch.utils._runtime_estimation's formulas {r['upstream'] * 1e3:.2f} ms, ratio {r['upstream'] / measured:.3f}")
    print(f"calls >= {SHARE:.0%} of the step: {len(ratios)}, within +-{BAND:.0%}: {inside}"
          + (f", ratio range {min(ratios):.2f}-{max(ratios):.2f}" if ratios else ""))
    print("\n| call | share | estimated | measured | est/meas | bound |\n|---|---:|---:|---:|---:|---|")
    for call, e, m in r["calls"]:
        print(f"| {call.label} | {m / measured:.1%} | {e * 1e3:.3f} ms | {m * 1e3:.3f} ms | {e / m:.2f} | "
              f"{est.dominant_bound(call)} |")
    print("\nby op class (estimated / measured):", ", ".join(
        f"{cls} {e * 1e3:.2f}/{m * 1e3:.2f} ms" for cls, (e, m) in sorted(by_class(r["graph"], est).items(),
                                                                            key=lambda kv: -kv[1][1])))


def by_class(g: dt.Graph, est: Any) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for op in g.ops:
        cls = est.classes[op.index] or "free"
        e, m = out.get(cls, (0.0, 0.0))
        out[cls] = (e + est.time(op), m + (op.time or 0.0))
    return out


def decoder_speed(layers: int) -> None:
    sys.path.insert(0, str(HERE))
    import overhead

    model, x = overhead.decoder(layers)
    with dt.capture(model) as g:
        model(x)
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        g.estimate("h100")
        runs.append(time.perf_counter() - t0)
        from dispatchtrace.views import _costs

        _costs._CACHE.pop(g, None)  # each run computes the FLOPs again, as a first estimate does
    print(f"\ng.estimate of the {layers}-layer decoder ({len(g.ops)} ops): median {statistics.median(runs):.3f} s "
          f"(runs {', '.join(f'{t:.3f}' for t in runs)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--spec", help="a spec JSON from dispatchtrace calibrate (default: calibrate now)")
    parser.add_argument("--quick", action="store_true", help="calibrate's quick plan")
    parser.add_argument("--decoder", type=int, default=0, help="time g.estimate on this many decoder layers")
    parser.add_argument("--repeat", type=int, default=3, help="timed captures per model (each op's least time)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="calibrate and time this many times over, interleaved; the median of the rounds' ratios")
    parser.add_argument("--device", default="cpu", help="cpu (one thread) or cuda (CUDA events; scripts/gpu-check.sh)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), torch {torch.__version__}, "
          f"1 thread; load average before: {os.getloadavg()[0]:.2f}")
    def spec_now() -> dt.DeviceSpec:
        if args.spec:
            return dt.DeviceSpec.load(args.spec)
        t0 = time.perf_counter()
        spec = dt.DeviceSpec.calibrate(args.device, threads=1 if args.device == "cpu" else None, quick=args.quick)
        print(f"calibrated in {time.perf_counter() - t0:.0f} s: {spec!r}", flush=True)
        return spec

    if args.rounds <= 1:
        spec = spec_now()
        for name in args.rows:
            report(row(name, spec, args.repeat, args.device))
    else:
        built = {name: warmed(name, args.device) for name in args.rows}
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in args.rows}
        for _ in range(args.rounds):
            spec = spec_now()
            for name in args.rows:
                results[name].append(row(name, spec, args.repeat, args.device, built[name]))
        for name in args.rows:
            report_rounds(name, results[name])
    if args.decoder:
        decoder_speed(args.decoder)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
