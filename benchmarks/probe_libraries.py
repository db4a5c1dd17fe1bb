"""Probes dispatchtrace on the ``transformers`` and ``timm`` specs of ``zoo_libraries.py``: one table of checks.

    .venv/bin/python benchmarks/probe_libraries.py            # every spec, a Markdown table on stdout
    .venv/bin/python benchmarks/probe_libraries.py gpt2 swin  # only names containing these words

Each cell is ``ok``, ``-`` (not applicable) or the first line of the exception (or the report's
first failing line) that the check met. The checks: the plain forward runs; ``dt.capture`` runs
and sets no ``g.error``; ``g.calls`` equals the calls a global forward pre-hook sees while forward
runs (calls made during backward excluded); ``len(g.ops)`` equals the forward ops an empty dispatch
mode counts; ``g.inputs`` is non-empty and holds every keyword tensor by its keyword; ``g.lint()``
passes (where it exists); ``g.to_fx(model)`` builds; ``dt.verify`` passes; it leaves
``state_dict()`` as it was; ``zoo``'s check (replay of this very capture) passes; the replay,
called as the model was called (``gm(*args, **kwargs)``), reproduces the model's main output on a
second input of the same shape; and on the meta device, capture and ``dt.verify`` (shapes, dtypes) run.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import zoo_libraries as zl  # noqa: E402  (sets HF_HUB_OFFLINE before transformers is imported)
from torch.nn.modules.module import register_module_forward_pre_hook  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import dispatchtrace as dt  # noqa: E402
from dispatchtrace.verify import _constant_values, check, clone_tensors  # noqa: E402

CHECKS = ("plain", "capture", "calls", "ops", "inputs", "lint", "to_fx", "verify", "state", "check", "second", "meta")


@dataclass
class Probe:
    """One spec's check results: ``ok``, ``-`` or the failure's first line, by check name."""

    name: str
    cells: dict[str, str] = field(default_factory=dict)
    ops: int = 0
    calls: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v in ("ok", "-") or v.startswith("unsupported") for v in self.cells.values())


def first_line(exc: BaseException) -> str:
    """``Type: first line``; a first line ending in ``:`` brings the next one (ReplayError lists its tensors)."""
    lines = [s.strip() for s in str(exc).strip().splitlines() if s.strip()]
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text[:260]}"


class _Count(TorchDispatchMode):
    """Counts forward ops (none from backward): the independent op count."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if torch._C._current_graph_task_id() == -1:
            self.n += 1
        return func(*args, **(kwargs or {}))


def step(spec: zl.LibSpec, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What the capture block runs: the forward, then ``loss(out).backward()`` for backward specs."""
    out = model(*args, **kwargs)
    if spec.loss is not None:
        spec.loss(out).backward()
    return out


def hooked(spec: zl.LibSpec, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[str], int]:
    """Module paths a global pre-hook sees while forward runs (not during backward), and the op count."""
    paths = {id(m): p for p, m in model.named_modules()}
    seen: list[str] = []

    def pre(m: nn.Module, a: Any) -> None:
        if torch._C._current_graph_task_id() == -1:
            seen.append(paths.get(id(m), type(m).__name__))

    handle = register_module_forward_pre_hook(pre)
    try:
        with _Count() as count:
            step(spec, model, args, kwargs)
    finally:
        handle.remove()
    return seen, count.n


def main_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor of an output: a tensor itself, ``logits`` / ``last_hidden_state`` of a ModelOutput."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            if (t := main_tensor(v)) is not None:
                return t
    return None


def build(spec: zl.LibSpec, device: str) -> nn.Module:
    torch.manual_seed(0)
    place = torch.device("meta") if device == "meta" else contextlib.nullcontext()
    with place:
        model = spec.build()
    return model.train(spec.train)


def _to(device: str, value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device).requires_grad_(t.requires_grad), value)


def attempt(cells: dict[str, str], name: str, fn: Callable[[], str | None]) -> Any:
    """Run one check: ``fn`` returns ``None`` for ok or a failure line; an exception is its first line."""
    try:
        problem = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a table cell
        problem = first_line(exc)
    cells[name] = "ok" if problem is None else problem
    return problem is None


def probe(spec: zl.LibSpec) -> Probe:
    row = Probe(spec.name)
    cells = row.cells
    t0 = time.perf_counter()
    model = build(spec, "cpu")
    torch.manual_seed(1)
    args, kwargs = spec.inputs()
    before = clone_tensors((args, kwargs))
    state: dict[str, Any] = {}

    def plain() -> None:
        step(spec, model, *clone_tensors((args, kwargs)))  # warms caches filled on the first call

    if not attempt(cells, "plain", plain):
        return row

    def captured() -> str | None:
        a, k = clone_tensors((args, kwargs))
        with dt.capture(model) as g:
            state["out"] = step(spec, model, a, k)
        state["g"] = g
        row.ops, row.calls = len(g.ops), len(g.calls)
        return None if g.error is None else f"g.error = {first_line(g.error)}"

    if not attempt(cells, "capture", captured):
        return row
    g = state["g"]

    def calls() -> str | None:
        hooks, count = hooked(spec, model, *clone_tensors((args, kwargs)))
        state["count"] = count
        paths = [c.path for c in g.calls]
        if paths == hooks:
            return None
        i = next((i for i, (a, b) in enumerate(zip(paths, hooks, strict=False)) if a != b), min(len(paths), len(hooks)))
        return f"differ at #{i}: {paths[i:i + 2]} vs pre-hook {hooks[i:i + 2]} ({len(paths)} vs {len(hooks)})"

    attempt(cells, "calls", calls)
    attempt(cells, "ops", lambda: None if len(g.ops) == state.get("count") else
            f"{len(g.ops)} captured, empty mode {state.get('count')}")

    def inputs() -> str | None:
        names = [r.name for r in g.inputs]
        if not names:
            return "g.inputs is empty"
        missing = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k not in names]
        return f"keywords {missing} not among g.inputs {names}" if missing else None

    attempt(cells, "inputs", inputs)
    if hasattr(g, "lint"):
        attempt(cells, "lint", lambda: (lambda r: None if not r else str(r).splitlines()[0])(g.lint()))
    else:
        cells["lint"] = "-"

    def to_fx() -> None:
        state["gm"] = g.to_fx(model)

    attempt(cells, "to_fx", to_fx)
    fresh = clone_tensors(before)
    kept = {k: v.detach().clone() for k, v in model.state_dict().items()}
    attempt(cells, "verify", lambda: None if (r := dt.verify(model, *fresh[0], **fresh[1])) else _report_line(r))
    moved = [k for k, v in model.state_dict().items() if k not in kept or not torch.equal(v, kept[k])]
    cells["state"] = "ok" if not moved else f"verify changed {len(moved)} state_dict entries: {moved[:3]}"
    attempt(cells, "check", lambda: None if (r := check(g, model, state["out"], *clone_tensors(before))) else
            _report_line(r))

    def second() -> str | None:
        if spec.value_dependent:
            return "-"
        if spec.loss is not None:
            return "-"  # the capture holds backward's effects; a forward-only replay is not comparable
        gm, how = state.get("gm"), []
        if gm is None:  # replay with the constants verify takes from an eager run: are they baked-in inputs?
            gm = g.to_fx(model, constants=_constant_values(g, model, *clone_tensors(before)))
            how.append("with eager constants")
        torch.manual_seed(2)
        a2, k2 = spec.inputs()
        want = main_tensor(model(*clone_tensors(a2), **clone_tensors(k2)))
        try:
            got = main_tensor(gm(*clone_tensors(a2), **clone_tensors(k2)))
        except TypeError as exc:  # the replay's signature is not the forward's: fall back to its placeholders
            how.append(f"gm(*args, **kwargs) {first_line(exc)}; gm(*positional tensors)")
            got = main_tensor(gm(*[t for t in pytree.tree_leaves(clone_tensors(a2)) if isinstance(t, torch.Tensor)]))
        if got is None or want is None:
            return f"no tensor to compare (replay {type(got).__name__}, model {type(want).__name__})"
        if got.shape != want.shape:
            result = f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
        elif torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            result = "ok" if not how else "reproduces"
        else:
            result = f"max abs diff {float((got.double() - want.double()).abs().max()):.3g}"
        return None if result == "ok" else "; ".join(how + [result])

    try:
        result = second()
    except Exception as exc:  # noqa: BLE001
        result = first_line(exc)
    cells["second"] = "ok" if result is None else result

    def meta() -> str | None:
        if spec.loss is not None:
            return "-"
        m = build(spec, "meta")
        a, k = _to("meta", spec.inputs())
        try:
            m(*a, **k)
        except Exception as exc:  # noqa: BLE001 - the model itself cannot run on meta
            return f"unsupported (plain forward: {first_line(exc)})"
        report = dt.verify(m, *a, **k)
        return None if report else _report_line(report)

    try:
        result = meta()
    except Exception as exc:  # noqa: BLE001
        result = first_line(exc)
    cells["meta"] = "ok" if result is None else result
    row.seconds = time.perf_counter() - t0
    return row


def _report_line(report: Any) -> str:
    lines = str(report).splitlines()
    return " / ".join(s.strip() for s in lines[1:3]) or lines[0]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[Probe]) -> list[str]:
    out = ["| model | ops | calls | " + " | ".join(CHECKS) + " | s |", "|---|---:|---:|" + ":-:|" * len(CHECKS) + "---:|"]
    for r in rows:
        cells = [r.cells.get(c, "not run") for c in CHECKS]
        cells = [c if c in ("ok", "-") or c.startswith("unsupported") else f"**{_cell(c)}**" for c in cells]
        out.append(f"| {r.name} | {r.ops} | {r.calls} | " + " | ".join(cells) + f" | {r.seconds:.1f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="probe only specs whose name contains one of these")
    opts = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    rows = []
    for spec in zl.specs():
        if opts.only and not any(w in spec.name for w in opts.only):
            continue
        row = probe(spec)
        print(f"{spec.name:40s} {'ok' if row.ok else 'PROBLEMS'} {row.seconds:.1f}s", file=sys.stderr, flush=True)
        rows.append(row)
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
