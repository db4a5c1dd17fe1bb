"""The floor under any Python op tracer: minimal dispatch-mode recorders, side by side with dispatchtrace.

Run: .venv/bin/python benchmarks/floor.py [--repeat 9] [ROW ...]   (ROW as in overhead.py: resnet50:meta,
decoder:8; default resnet50:meta vit_b_16:meta decoder:8)

Each variant records a little more than the one before, interleaved in one process (one thread, eval,
``torch.no_grad()``, medians), and prints µs per op over the empty mode and Python calls per op (as
``benchmarks/ab.py`` counts them: load-independent):

- ``count``: a dispatch mode that runs the op and counts it (the price of a Python ``__torch_dispatch__``
  doing anything at all past the empty mode's one call);
- ``identity``: per op one slotted record (target, argument and output records); per tensor argument a
  lookup of the record of the tensor that made it (by ``id``, checked by a weak ref); per tensor output its
  shape, dtype, device and storage read and a weak ref kept (what linking ops by tensor identity needs);
- ``+ module scope``: global module pre- and always-called forward hooks pushing and popping a stack of
  call records (what labelling ops by module call needs; torch's hooked ``Module.__call__`` path included);
- ``+ source line``: per op and per call, the first frame outside torch (``sys._getframe`` walk);
- ``dispatchtrace`` and ``FlopCounterMode``.

The minimal recorders are not tracers (no views, no aliasing, versions, writes, names, phases or
checks): they show how much of dispatchtrace's cost any tracer built on the same hooks pays.
"""

from __future__ import annotations

import argparse
import sys
import weakref
from pathlib import Path
from typing import Any

import ab
import overhead
import torch
import torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt

Tensor = torch.Tensor
_TORCH = str(Path(torch.__file__).parent)
_HERE = str(Path(__file__).resolve())


class Counting(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.n += 1
        return out


class Rec:
    __slots__ = ("target", "args", "outputs", "call", "site")

    def __init__(self, target: Any, args: tuple[Any, ...], outputs: tuple[Any, ...], call: Any, site: Any) -> None:
        self.target, self.args, self.outputs, self.call, self.site = target, args, outputs, call, site


class Out:
    __slots__ = ("shape", "dtype", "device", "storage", "producer")

    def __init__(self, shape: Any, dtype: Any, device: Any, storage: int, producer: Rec) -> None:
        self.shape, self.dtype, self.device, self.storage, self.producer = shape, dtype, device, storage, producer


_internal: set[str] = set()
_user: set[str] = set()


def _site(skip: int) -> tuple[Any, int] | None:
    frame: Any = sys._getframe(skip)
    while frame is not None:
        name = frame.f_code.co_filename
        if name in _internal:  # a set test, not a call, per frame walked
            frame = frame.f_back
            continue
        if name not in _user:
            if name.startswith(_TORCH) or name == _HERE:
                _internal.add(name)
                continue
            _user.add(name)
        return frame.f_code, frame.f_lasti
    return None


class Identity(TorchDispatchMode):
    """The minimal op-level recorder (see the module docstring); ``scope`` and ``sites`` add the rest."""

    def __init__(self, scope: bool = False, sites: bool = False) -> None:
        super().__init__()
        self.ops: list[Rec] = []
        self.live: dict[int, tuple[weakref.ref[Tensor], Out]] = {}
        self.stack: list[Any] = [None]
        self.sites = sites
        self.handles = []
        if scope:
            self.handles = [register_module_forward_pre_hook(self._pre),
                            register_module_forward_hook(self._post, always_call=True)]

    def _pre(self, module: nn.Module, args: Any) -> None:
        self.stack.append((module, self.stack[-1], _site(2) if self.sites else None))

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if len(self.stack) > 1:
            self.stack.pop()

    def __exit__(self, *exc: Any) -> Any:
        for h in self.handles:
            h.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        live = self.live
        rargs = []
        for a in args:
            if isinstance(a, Tensor):
                entry = live.get(id(a))
                rargs.append(entry[1] if entry is not None and entry[0]() is a else None)
            else:
                rargs.append(a)
        rec = Rec(func, tuple(rargs), (), self.stack[-1], _site(2) if self.sites else None)
        if isinstance(out, Tensor):
            o = Out(out.shape, out.dtype, out.device, out.untyped_storage()._cdata, rec)
            live[id(out)] = (weakref.ref(out), o)
            rec.outputs = (o,)
        self.ops.append(rec)
        return out


def variants(model: nn.Module, x: Any) -> dict[str, Any]:
    def run(mode_factory: Any) -> Any:
        def fn() -> Any:
            with mode_factory():
                model(x)
        return fn

    def capture() -> Any:
        with dt.capture(model) as g:
            model(x)
        return g

    base = overhead.variants(model, x)
    return {"empty": base["empty"], "count": run(Counting), "identity": run(Identity),
            "+ module scope": run(lambda: Identity(scope=True)),
            "+ source line": run(lambda: Identity(scope=True, sites=True)),
            "dispatchtrace": capture, "FlopCounterMode": base["flops"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", default=["resnet50:meta", "vit_b_16:meta", "decoder:8"])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_intermixed_args()
    overhead.configure()
    print(f"torch {torch.__version__}, median of {args.repeat}, load average {overhead.loadavg()}\n")
    names = list(variants(nn.Identity(), None))
    print("| row | ops | empty ms | " + " | ".join(names[1:]) + " |")
    print("|---|---:|---:|" + "---:|" * (len(names) - 1))
    for row in args.rows:
        model, x = ab.row_model(row)
        with torch.no_grad():
            fns = variants(model, x)
            n = len(fns["dispatchtrace"]().ops)
            med = overhead.interleaved(fns, args.repeat)
            counts = {k: ab.calls(f) for k, f in fns.items()}
        cells = [f"{(med[k] - med['empty']) / n * 1e6:.1f} µs, {(counts[k] - counts['empty']) / n:.0f} calls"
                 for k in names[1:]]
        print(f"| {row} | {n} | {med['empty'] * 1e3:.1f} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nload average after: {overhead.loadavg()}")


if __name__ == "__main__":
    main()
