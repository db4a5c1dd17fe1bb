"""Numerics: what ``values="stats"`` costs, and how long ``dt.diff`` of two large captures takes.

Run: .venv/bin/python benchmarks/numerics.py [--repeat 5] [--layers 126] [--skip-resnet]

- ResNet-50 on the CPU, one thread, eval, ``torch.no_grad()``, 1 x 3 x 224 x 224: a plain forward, the
  stats-free ``dt.capture``, ``dt.capture(values="stats")`` (and with ``stats=("mean",)``, ``stats=("zeros",)``; with
  ``--fingerprint``, ``stats=("fingerprint",)`` too), DebugMode with ``log_tensor_hashes()`` (its
  default L2-norm hash of every op output) and a floor: a bare dispatch mode that takes one ``aminmax`` of
  each tensor an op returns (the cheapest pass any value statistic needs, with no recording at all),
  interleaved, medians (``overhead.interleaved``).
- ``dt.diff`` of two captures of the Llama-style decoder of ``examples/llama_meta.py`` on the CPU at a small
  width (dim 64, 4 heads, 2 KV heads, hidden 128, 16 tokens) and ``--layers`` deep (160: about 12k ops), with
  stats, one with one weight perturbed: live, and loaded from saved files; with ``tracemalloc``'s peak.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import overhead
import torch
import torchvision
from torch.utils._debug_mode import DebugMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dispatchtrace as dt


class OnePass(TorchDispatchMode):
    """The floor: each tensor an op returns read once by ``aminmax`` (its result brought to Python), nothing
    recorded. Any per-value statistic costs at least this."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.numel() and t.dtype.is_floating_point:
                lo, hi = torch.aminmax(t)
                lo.item(), hi.item()
        return out


def resnet(repeat: int, fingerprints: bool) -> None:
    torch.manual_seed(0)
    model, x = torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 224, 224)

    def plain() -> None:
        model(x)

    def capture() -> None:
        with dt.capture(model):
            model(x)

    def stats() -> None:
        with dt.capture(model, values="stats"):
            model(x)

    def mean() -> None:
        with dt.capture(model, values="stats", stats=("mean",)):
            model(x)

    def zeros() -> None:
        with dt.capture(model, values="stats", stats=("zeros",)):
            model(x)

    def fingerprint() -> None:
        with dt.capture(model, values="stats", stats=("fingerprint",)):
            model(x)

    def hashes() -> None:
        with DebugMode() as mode, mode.log_tensor_hashes():
            model(x)

    def one_pass() -> None:
        with OnePass():
            model(x)

    with torch.no_grad():
        variants = {"plain": plain, "capture": capture, "stats": stats, "mean": mean, "zeros": zeros, "hashes": hashes,
                    "one_pass": one_pass}
        if fingerprints:
            variants["fingerprint"] = fingerprint
        times = overhead.interleaved(variants, repeat)
    base = times["plain"]
    print(f"resnet50 cpu, 1 thread, load average {overhead.loadavg()}")
    for name, label in (("plain", "plain forward"), ("capture", "dt.capture"), ("stats", 'dt.capture(values="stats")'),
                        ("mean", '... stats=("mean",)'), ("zeros", '... stats=("zeros",)'), ("fingerprint", '... stats=("fingerprint",)'),
                        ("hashes", "DebugMode + log_tensor_hashes()"), ("one_pass", "floor: one aminmax per output")):
        if name not in times:
            continue
        print(f"  {label:<34} {times[name] * 1e3:8.1f} ms  {times[name] / base:5.2f}x")


def parts(repeat: int) -> None:
    """What each reduction costs on ResNet-50's own tensors (each op's results and the parameters, kept from one
    forward), each run over all of them: medians of ``time.process_time``."""
    from dispatchtrace.recording._stats import _flat, _nonzero, _norm, fingerprint_of, stats_of

    torch.manual_seed(0)
    model, x = torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 224, 224)
    kept: list[torch.Tensor] = []

    class Keep(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            kept.extend(t.clone() for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.numel())
            return out

    with torch.no_grad(), Keep():
        model(x)
    kept += [p.detach().clone() for p in model.parameters()]
    flat = [_flat(t if t.is_floating_point() else t.double()) for t in kept]
    runs = {
        "stats_of (the default)": lambda t: stats_of(t),
        "stats_of, mean=True": lambda t: stats_of(t, mean=True),
        "stats_of, zeros=True": lambda t: stats_of(t, zeros=True),
        "aminmax (two .item())": lambda t: [v.item() for v in torch.aminmax(t)],
        "sum (torch's, .item())": lambda t: t.sum().item(),
        "L2 norm (whole, or blocks)": lambda t: _norm(t, t.numel()),
        "zero count (on the bits)": lambda t: _nonzero(t),
        "fingerprint": lambda t: fingerprint_of(t),
    }
    print(f"resnet50's {len(kept)} tensors, {sum(t.numel() for t in kept) / 1e6:.1f} M elements (process time, median of {repeat})")
    for name, f in runs.items():
        times = []
        for _ in range(repeat):
            t0 = time.process_time()
            for t in (kept if name.startswith(("stats_of", "fingerprint")) else flat):
                f(t)
            times.append(time.process_time() - t0)
        print(f"  {name:<28} {sorted(times)[len(times) // 2] * 1e3:7.1f} ms")


def decoder(layers: int) -> tuple[torch.nn.Module, torch.Tensor]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import llama_meta

    torch.manual_seed(0)
    config = llama_meta.Config(vocab=256, dim=64, layers=layers, heads=4, kv_heads=2, hidden=128, max_seq=16)
    return llama_meta.Llama(config).eval(), torch.randint(0, 256, (1, 16))


def diff(layers: int, repeat: int) -> None:
    model, x = decoder(layers)
    other = copy.deepcopy(model)
    with torch.no_grad():
        middle = f"layers.{layers // 2}."
        next(p for n, p in other.named_parameters() if n.startswith(middle) and p.dim() == 2)[0, 0] += 1.0

    def run(m: torch.nn.Module) -> dt.Graph:
        with torch.no_grad(), dt.capture(m, values="stats") as g:
            m(x)
        return g

    t0 = time.perf_counter()
    a = run(model)
    t_capture = time.perf_counter() - t0
    b = run(other)
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        d = dt.diff(a, b)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    dt.diff(a, b)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    with tempfile.TemporaryDirectory() as tmp:
        a.save(os.path.join(tmp, "a.json"))
        b.save(os.path.join(tmp, "b.json"))
        la, lb = dt.load(os.path.join(tmp, "a.json")), dt.load(os.path.join(tmp, "b.json"))
    loaded = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        dl = dt.diff(la, lb)
        loaded.append(time.perf_counter() - t0)
    assert dl.first is not None and d.first is not None and dl.first.a.index == d.first.a.index  # type: ignore[union-attr]
    med = sorted(times)[len(times) // 2]
    med_loaded = sorted(loaded)[len(loaded) // 2]
    print(f"decoder {layers} layers cpu: {len(a.ops)} ops, {len(a.calls)} calls; capture with stats {t_capture:.2f} s")
    print(f"  dt.diff live   {med:.3f} s   loaded {med_loaded:.3f} s   peak {peak / 2**20:.1f} MiB "
          f"({peak / len(a.ops):.0f} bytes per op); first departure {d.first.a.name} in {d.first.a.call.label}")  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", type=int, default=160)
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--fingerprint", action="store_true", help='also stats=("fingerprint",) (slow)')
    parser.add_argument("--skip-diff", action="store_true")
    parser.add_argument("--parts", action="store_true", help="what each reduction costs on ResNet-50's tensors")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not args.skip_resnet:
        resnet(args.repeat, args.fingerprint)
    if args.parts:
        parts(args.repeat)
    if not args.skip_diff:
        diff(args.layers, args.repeat)


if __name__ == "__main__":
    main()
