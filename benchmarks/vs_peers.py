"""Capture overhead against torchview and torchlens: overhead.py's six rows, the peers beside dispatchtrace.

Run: .venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/vs_peers.py [--repeat 11] [--rows resnet50:meta ...]

The models, inputs, variants and interleaving are ``benchmarks/overhead.py``'s: one process,
torch.set_num_threads(1), the MHA fast path off, eval mode under torch.no_grad(), medians, ratios to the
plain forward of this run, "µs/op over floor" = (tool - empty mode) / dispatchtrace's ATen op count.

The peers change global state while they run (torchview swaps ``nn.Module.__call__`` and torch's
creation functions; torchlens wraps torch's functions and unwraps them when done), so they are imported
only after plain, the empty mode, FlopCounterMode and dispatchtrace have been timed on every row; then
each row times torchview and torchlens interleaved with plain and the empty mode again: the peers'
ratios and µs/op are taken against those, timed beside them ("plain after peers" is that plain over the
first one: ~1.00 when nothing stayed wrapped and the load held). At the end the torch namespaces and global module hooks are compared with a
snapshot taken before the peers were imported.

Each peer runs in the cheapest mode that still records the whole forward:
- torchview: ``draw_graph(model, input_data=x, device=..., depth=0)``; ``save_graph=False`` (its
  default) so graphviz never renders, and depth 0 so the least is written into its ``graphviz.Digraph``
  (tracing records every module and function at any depth); ``collect_attributes``, ``roll`` and
  ``expand_nested`` stay off.
- torchlens: ``trace(model, x, save=None, capture=CaptureOptions(...))``: no activations saved,
  ``inference_only`` (under no_grad, as the others), no recurrence detection, no input/output distances,
  ``unwrap_when_done``; on meta it adds ``structure_only=True``, the only mode in which torchlens
  admits meta models.
A peer that raises is not timed; its cells give the exception, its full text is printed below the table.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402

OURS = ("plain", "empty", "flops", "dispatchtrace")
PEERS = ("torchview", "torchlens")
INSTALL = "pip install -e '.[bench]' (or: pip install torchview torchlens)"


def peer_modules() -> dict[str, types.ModuleType | str]:
    """Each peer's module, imported now, or why it could not be."""
    found: dict[str, types.ModuleType | str] = {}
    for name in PEERS:
        try:
            found[name] = importlib.import_module(name)
        except ImportError as e:
            found[name] = "not installed"
            print(f"{name} is not installed ({e}): {INSTALL}", file=sys.stderr, flush=True)
    return found


def peer_variants(model: nn.Module, x: torch.Tensor, device: str,
                  mods: dict[str, types.ModuleType | str]) -> dict[str, Callable[[], Any] | str]:
    """One callable per installed peer (the options in this module's docstring), else why not."""
    fns: dict[str, Callable[[], Any] | str] = {}
    tv = mods["torchview"]
    if isinstance(tv, str):
        fns["torchview"] = tv
    else:
        fns["torchview"] = lambda: tv.draw_graph(model, input_data=x, device=device, depth=0, save_graph=False)
    tl = mods["torchlens"]
    if isinstance(tl, str):
        fns["torchlens"] = tl
    else:
        from torchlens.options import CaptureOptions

        opts = CaptureOptions(unwrap_when_done=True, inference_only=True, recurrence_detection=False,
                              compute_input_output_distances=False, structure_only=device == "meta")
        fns["torchlens"] = lambda: tl.trace(model, x, save=None, capture=opts)
    return fns


def why(e: BaseException) -> tuple[str, str]:
    """A one-line cell for a peer's failure (innermost cause, type and first line) and its full text."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    first = first if len(first) <= 100 else first[:97] + "..."
    return f"fails: {type(e).__name__}: {first}".replace("|", "\\|"), f"{type(e).__name__}: {text}"


def peers_timed(model: nn.Module, x: torch.Tensor, device: str, mods: dict[str, types.ModuleType | str],
                repeat: int, med: dict[str, float]) -> dict[str, tuple[str, str]]:
    """Time the peers that run, interleaved with plain and the empty mode again (``plain_peers``,
    ``empty_peers``: the peers' ratios are taken against these, timed beside them), into ``med``;
    for the others, why not (cell, full text)."""
    ours = overhead.variants(model, x)
    timed: dict[str, Callable[[], Any]] = {"plain_peers": ours["plain"], "empty_peers": ours["empty"]}
    untimed: dict[str, tuple[str, str]] = {}
    for name, fn in peer_variants(model, x, device, mods).items():
        if isinstance(fn, str):
            untimed[name] = fn, ""
            continue
        try:
            fn()
        except Exception as e:  # the row says why; the others still run
            untimed[name] = why(e)
        else:
            timed[name] = fn
    med.update(overhead.interleaved(timed, repeat))
    return untimed


def _namespaces() -> dict[str, Any]:
    names = ["torch", "torch.functional", "torch.nn.functional", "torch.nn.init", "torch.linalg", "torch.fft",
             "torch.special", "torch._VF"]
    spaces: dict[str, Any] = {n: sys.modules[n] for n in names if n in sys.modules}
    spaces.update({"torch.Tensor": torch.Tensor, "torch._C.TensorBase": torch._C.TensorBase,
                   "torch.nn.Module": nn.Module, "torch.ops.torchvision": torch.ops.torchvision})
    return spaces


def snapshot() -> dict[str, Any]:
    """What the peers could leave changed: each namespace's attributes and the global module hooks."""
    from torch.nn.modules import module as m

    hooks = {k: dict(getattr(m, k)) for k in dir(m) if k.startswith("_global_") and isinstance(getattr(m, k), dict)}
    return {"attrs": {n: dict(vars(ns)) for n, ns in _namespaces().items()}, "hooks": hooks}


def changed_since(before: dict[str, Any]) -> list[str]:
    """Attributes replaced, Python functions added (wrappers; torch caches builtins and op packets as it goes)
    in a namespace, and global hooks added, since ``before``."""
    now = snapshot()
    out = []
    for n, attrs in before["attrs"].items():
        current = now["attrs"][n]
        out += [f"{n}.{k}" for k, v in attrs.items() if k in current and current[k] is not v]
        out += [f"{n}.{k} (added)" for k, v in current.items()
                if k not in attrs and (isinstance(v, types.FunctionType) or hasattr(v, "__wrapped__"))]
    for k, hooks in before["hooks"].items():
        out += [f"{k}[{h}] (added)" for h in now["hooks"][k] if h not in hooks]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog=f"torchview and torchlens are benchmark-only: {INSTALL}")
    parser.add_argument("--repeat", type=int, default=11, help="timed runs of each variant per row (medians)")
    parser.add_argument("--rows", nargs="*", default=[f"{m}:{d}" for m, d in overhead.TABLE],
                        help="rows as model:device, models from benchmarks/overhead.py")
    args = parser.parse_args()
    rows = [tuple(r.split(":")) for r in args.rows]
    overhead.configure()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, median of {args.repeat}, "
          f"dispatchtrace from {Path(overhead.dt.__file__).parent}")
    print(f"load average before: {overhead.loadavg()}", flush=True)

    built = {row: overhead.model_input(*row) for row in rows}
    ours: dict[tuple[str, str], tuple[dict[str, float], int]] = {}
    with torch.no_grad():
        for row, (model, x) in built.items():  # no peer has been imported yet
            fns = overhead.variants(model, x)
            fns = {k: fns[k] for k in OURS}
            ours[row] = overhead.interleaved(fns, args.repeat), len(fns["dispatchtrace"]().ops)

    before = snapshot()
    mods = peer_modules()
    print(", ".join(f"{n} {m if isinstance(m, str) else getattr(m, '__version__', '?')}" for n, m in mods.items()))
    print("| model | device | ops | plain ms | empty mode (floor) | FlopCounterMode | dispatchtrace | torchview "
          "| torchlens | µs/op over floor: FlopCounterMode | dispatchtrace | torchview | torchlens "
          "| plain after peers |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    failures: list[str] = []
    with torch.no_grad():
        for row, (model, x) in built.items():
            med, n_ops = ours[row]
            cells = {}
            for name, (cell, text) in peers_timed(model, x, row[1], mods, args.repeat, med).items():
                cells[name] = (cell, "–")
                failures += [f"{name} on {row[0]}:{row[1]}: {text}"] if text else []
            after = med["plain_peers"]
            for name in ("flops", "dispatchtrace", *PEERS):
                if name in med:
                    plain, empty = (med["plain"], med["empty"]) if name in OURS else (after, med["empty_peers"])
                    cells[name] = (f"{med[name] / plain:.2f}", f"{(med[name] - empty) / n_ops * 1e6:.1f}")
            cols = ("flops", "dispatchtrace", *PEERS)
            print(f"| {row[0]} | {row[1]} | {n_ops} | {med['plain'] * 1e3:.1f} | {med['empty'] / med['plain']:.2f} | "
                  + " | ".join(cells[c][0] for c in cols) + " | " + " | ".join(cells[c][1] for c in cols)
                  + f" | {after / med['plain']:.2f} |", flush=True)
    print(f"load average after: {overhead.loadavg()}")
    left = changed_since(before)
    more = f" and {len(left) - 20} more" if len(left) > 20 else ""
    print("torch namespaces and global module hooks after the peers: "
          + (f"CHANGED: {', '.join(left[:20])}{more}" if left else "as before"))
    for f in failures:
        print(f"\n{f}")


if __name__ == "__main__":
    main()
