"""The model zoo: real models nobody wrote for dispatchtrace, and the checks run on each.

torchvision and ``torch.nn`` models here; Hugging Face ``transformers`` and ``timm`` models from
small configs in ``zoo_libraries.py`` (``specs(libraries=True)``). Used by ``benchmarks/coverage.py``
(writes ``docs/coverage.md``), ``tests/test_zoo.py`` and ``tests/views/test_views_zoo.py``.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn as nn
import torchvision
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt
from dispatchtrace._structure import tensors_in
from dispatchtrace.graph.lint import LintError
from dispatchtrace.replay._locate import _constant_values, clone_tensors
from dispatchtrace.replay._snapshot import ModuleState
from dispatchtrace.replay._verify import check

Device = Literal["cpu", "meta"]
Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Spec:
    """One zoo entry: how to build the model (no weights downloaded) and its small inputs.

    ``inputs`` draws from the global random state: ``run`` calls it under two seeds for the
    second-input check. ``train`` builds in train mode; ``loss`` runs ``loss(output).backward()``
    inside the capture block (gradient checkpointing recomputes forward calls there);
    ``value_dependent`` says the ops depend on the input values (detection's NMS), so a second
    input of the same shape may run other ops and is not checked.
    """

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], Inputs]
    no_grad: bool = False
    note: str = ""
    library: str = "torchvision"
    train: bool = False
    loss: Callable[[Any], torch.Tensor] | None = None
    value_dependent: bool = False


def _image(size: int = 64) -> Callable[[], Inputs]:
    return lambda: ((torch.randn(1, 3, size, size),), {})


# ViTs fix their image size at build time; a small one keeps the zoo inside CI time (same layers).
_SIZES: dict[str, tuple[int, dict[str, Any], str]] = {
    "inception_v3": (96, {"init_weights": True}, "96x96: the stem needs at least 75x75"),
    "googlenet": (64, {"init_weights": True}, ""),
    "vit_b_16": (64, {"image_size": 64}, "built with image_size=64"),
    "vit_b_32": (64, {"image_size": 64}, "built with image_size=64"),
    "vit_l_16": (64, {"image_size": 64}, "built with image_size=64"),
    "vit_l_32": (64, {"image_size": 64}, "built with image_size=64"),
    "vit_h_14": (56, {"image_size": 56}, "built with image_size=56"),
    "maxvit_t": (224, {}, "224x224: MaxViT's grid and window partitions need it"),
}


def _classification(name: str) -> Spec:
    size, kwargs, note = _SIZES.get(name, (64, {}, ""))
    return Spec(name, lambda: torchvision.models.get_model(name, weights=None, **kwargs), _image(size), note=note)


def _builtin_specs() -> list[Spec]:
    from torchvision.models import detection, optical_flow, segmentation, video

    def _nn(*args: Any, **kwargs: Any) -> Spec:
        return Spec(*args, library="torch.nn", **kwargs)

    def seq(length: int, batch: int, dim: int) -> Callable[[], Inputs]:
        return lambda: ((torch.randn(length, batch, dim),), {})

    def attention(batch_first: bool) -> Callable[[], Inputs]:
        def make() -> Inputs:
            x = torch.randn(2, 6, 32) if batch_first else torch.randn(6, 2, 32)
            return (x, x, x), {"need_weights": False} if batch_first else {}
        return make

    return [
        Spec("fasterrcnn_mobilenet_v3_large_320_fpn",
             lambda: detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None),
             lambda: (([torch.rand(3, 96, 128)],), {}), value_dependent=True,
             note="list-of-dict outputs; the boxes kept depend on the values (NMS), so no second input"),
        Spec("deeplabv3_mobilenet_v3_large",
             lambda: segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None), _image(64),
             note="dict output"),
        Spec("r3d_18", lambda: video.r3d_18(weights=None), lambda: ((torch.randn(1, 3, 4, 32, 32),), {}),
             note="clip 1x3x4x32x32"),
        Spec("raft_small", lambda: optical_flow.raft_small(weights=None),
             lambda: ((torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128)), {"num_flow_updates": 4}),
             note="two 128x128 images (the correlation pyramid needs them), 4 refinement steps"),
        _nn("nn.LSTM", lambda: nn.LSTM(16, 32, num_layers=2), seq(5, 2, 16)),
        _nn("nn.GRU", lambda: nn.GRU(16, 32, num_layers=2, bidirectional=True), seq(5, 2, 16),
            note="bidirectional"),
        _nn("nn.MultiheadAttention", lambda: nn.MultiheadAttention(32, 4), attention(False)),
        _nn("nn.MultiheadAttention (fast path)", lambda: nn.MultiheadAttention(32, 4, batch_first=True),
            attention(True), no_grad=True, note="no_grad, batch_first: fused aten._native_multi_head_attention"),
        _nn("nn.Transformer", lambda: nn.Transformer(32, 4, 2, 2, 64),
            lambda: ((torch.randn(7, 2, 32), torch.randn(5, 2, 32)), {})),
        _nn("nn.Transformer (no_grad)", lambda: nn.Transformer(32, 4, 2, 2, 64, batch_first=True),
            lambda: ((torch.randn(2, 7, 32), torch.randn(2, 5, 32)), {}), no_grad=True,
            note="no_grad, batch_first: encoder fast path"),
    ]


def specs(*, libraries: bool = False) -> list[Spec]:
    """Every torchvision classification model, then the detection, segmentation, video, flow and nn
    entries; with ``libraries=True`` also the ``transformers`` and ``timm`` models of ``zoo_libraries.py``
    (the ``zoo`` extra)."""
    names = torchvision.models.list_models(module=torchvision.models)
    found = [_classification(n) for n in names] + _builtin_specs()
    if libraries:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # zoo_libraries imports this module as ``zoo``
        import zoo_libraries

        found += zoo_libraries.specs()
    return found


@dataclass
class Row:
    """What the checks found for one model on one device."""

    name: str
    device: Device
    library: str = ""
    ops: int = 0
    calls: int = 0
    calls_match: bool = False
    ops_match: bool = False
    lint: str = "not run"
    replay: str = "not run"
    second: str = "not run"
    plain_s: float = 0.0
    capture_s: float = 0.0
    pair_ratios: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unsupported: str = ""
    note: str = ""

    @property
    def ratio(self) -> float:
        """Median of (captured / plain) over back-to-back pairs; else best capture over best plain."""
        if self.pair_ratios:
            return statistics.median(self.pair_ratios)
        return self.capture_s / self.plain_s if self.plain_s else float("nan")

    @property
    def ok(self) -> bool:
        return not self.problems and (self.unsupported != "" or (self.calls_match and self.ops_match))


class _Count(TorchDispatchMode):
    """An empty dispatch mode that counts every op, backward ones too: the independent op count."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def step(spec: Spec, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a capture block of ``spec`` runs: the forward, then ``loss(output).backward()`` if it has a loss."""
    out = model(*args, **kwargs)
    if spec.loss is not None:
        spec.loss(out).backward()
    return out


#: how the pre-hook's list and the capture's name a call of a module outside the model's tree (a module built at
#: call time, such as transformers' kernels ``Func``): the capture names it after what it wraps, the hook cannot
OUTSIDE = "<outside the model>"


def hooked_forward(spec: Spec, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[str], int]:
    """Module paths a plain global forward pre-hook sees while forward runs (calls that backward
    makes, as checkpointing's recomputation, left out; a module outside the model's tree as ``OUTSIDE``, as its
    name is the capture's own: docs/semantics.md), and the op count of an empty dispatch mode."""
    paths = {id(m): p for p, m in model.named_modules()}
    seen: list[str] = []

    def pre(m: nn.Module, a: Any) -> None:
        if torch._C._current_graph_task_id() == -1:
            seen.append(paths.get(id(m), OUTSIDE))

    handle = register_module_forward_pre_hook(pre)
    try:
        with _Count() as count:
            step(spec, model, args, kwargs)
    finally:
        handle.remove()
    return seen, count.n


def _to(device: Device, value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device).requires_grad_(t.requires_grad), value)


def _first_lines(exc: BaseException) -> str:
    """``Type: first line``; for a first line ending in ``:`` (ReplayError's, before the tensors it lists), the next one."""
    lines = [s.strip() for s in str(exc).strip().splitlines() if s.strip()]
    text = lines[1] if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text[:240]}"


def build(spec: Spec, device: Device = "cpu") -> nn.Module:
    """``spec``'s model on ``device``, from seed 0, in train or eval mode as the spec says."""
    torch.manual_seed(0)
    place = torch.device("meta") if device == "meta" else contextlib.nullcontext()
    try:
        with place:
            model = spec.build()
    except Exception:  # noqa: BLE001 - some builders compute sizes with tensors (RegNet): build, then move
        model = spec.build().to(device)
    return model.train(spec.train)


def run(spec: Spec, device: Device, *, replay: bool = True, repeat: int = 0) -> Row:
    """Build ``spec`` on ``device``, run every check; never raises for the model's sake.

    The checks: the capture sets no ``g.error``; its calls equal, in order, what a global forward
    pre-hook sees; ``len(g.ops)`` equals an empty dispatch mode's count; ``g.lint()`` passes; every
    keyword tensor of the call is in ``g.inputs`` under its keyword; the replay reproduces the
    outputs (``verify.check``: values on CPU, shapes and dtypes on meta); in train mode ``dt.verify``
    passes and leaves ``state_dict()`` as it was (CPU); and (``second_input``) ``g.to_fx(model)``, built
    from the record alone and called as the model was, reproduces the model's output on a second
    input of the same shape (on CPU, where the spec's ops do not depend on the values).

    ``repeat`` back-to-back (plain, captured) pairs give the ratio (their median); ``repeat=0``
    (the tests) spends as few forwards as it can: the warm-up is the plain time, one capture.
    """
    row = Row(spec.name, device, library=spec.library, note=spec.note)
    model = build(spec, device)
    place = torch.device("meta") if device == "meta" else contextlib.nullcontext()
    grad = torch.no_grad() if spec.no_grad else contextlib.nullcontext()
    args, kwargs = _to(device, spec.inputs())
    with place, grad:
        # the first forward warms caches some models fill once (MultiScaleRoIAlign's scales):
        # every run compared below then does the same work
        try:
            t0 = time.perf_counter()
            step(spec, model, args, kwargs)
            first = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - the model itself cannot run here
            text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            row.unsupported = f"{type(exc).__name__}: {text}"
            return row
        # plain and captured forwards alternate, so both meet the same load; each time is the best
        row.plain_s, row.capture_s = first, float("inf")
        before = clone_tensors((args, kwargs))
        for _ in range(max(repeat, 1)):
            if repeat:
                t0 = time.perf_counter()
                step(spec, model, args, kwargs)
                plain = time.perf_counter() - t0
                row.plain_s = min(row.plain_s, plain)
            t0 = time.perf_counter()
            with dt.capture(model) as g:
                out = step(spec, model, args, kwargs)
            taken = time.perf_counter() - t0
            row.capture_s = min(row.capture_s, taken)
            if repeat:
                row.pair_ratios.append(taken / plain)
        if g.error is not None:
            row.problems.append(f"g.error: {_first_lines(g.error)}")
        hooks, count = hooked_forward(spec, model, args, kwargs)
        row.ops, row.calls = len(g.ops), len(g.calls)
        inside = {p for p, _ in model.named_modules()}
        paths = [c.path if c.path in inside else OUTSIDE for c in g.calls]
        row.calls_match = paths == hooks
        row.ops_match = len(g.ops) == count
        if not row.calls_match:
            first = next((i for i, (a, b) in enumerate(zip(paths, hooks, strict=False)) if a != b), min(len(paths), len(hooks)))
            row.problems.append(f"calls differ from the pre-hook's at #{first}: "
                                f"{paths[first:first + 2]} vs {hooks[first:first + 2]} ({len(paths)} vs {len(hooks)})")
        if not row.ops_match:
            row.problems.append(f"{len(g.ops)} ops captured, an empty dispatch mode counted {count}")
        try:
            g.lint()
            row.lint = "ok"
        except LintError as e:
            row.lint = "FAILED"
            row.problems.append(f"lint: {e}")
        names = [r.name for r in g.inputs]
        missing = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k not in names]
        if missing:
            row.problems.append(f"keyword tensors {missing} are not among g.inputs {names}")
        if replay:
            report = check(g, model, out, *before)
            row.replay = "ok" if report else "FAILED"
            if not report:
                row.problems.append(str(report))
            if spec.train and device == "cpu":  # values: the running stats
                row.problems += _verify_keeps_state(model, before)
            try:
                row.second = second_input(spec, g, model, before, device)
            except Exception as exc:  # noqa: BLE001 - the model's own run on the second input
                row.second = f"raised {_first_lines(exc)}"
            if row.second not in ("ok", "-"):
                row.problems.append(f"second input: {row.second}")
    return row


def _verify_keeps_state(model: nn.Module, inputs: Inputs) -> list[str]:
    """``dt.verify`` passes on a train-mode model and leaves its ``state_dict()`` as it was."""
    kept = {k: v.detach().clone() for k, v in model.state_dict().items()}
    args, kwargs = clone_tensors(inputs)
    report = dt.verify(model, *args, **kwargs)
    found = [] if report else [f"dt.verify: {report}"]
    moved = [k for k, v in model.state_dict().items() if k not in kept or not torch.equal(v, kept[k])]
    if moved:
        found.append(f"dt.verify changed {len(moved)} state_dict entries: {moved[:3]}")
    return found


def second_input(spec: Spec, g: dt.Graph, model: nn.Module, first: Inputs, device: Device) -> str:
    """``ok`` when the replay of ``g`` (captured on ``first``), called as the model is called,
    reproduces the model's output on a second input of the same shape; ``-`` for value-dependent
    specs and on meta (no values to bake in or compare); else what went wrong. Catches a value
    baked into the capture as a constant.

    Where ``to_fx`` refuses, or the replay's signature is not the forward's, it says so and goes
    on (constants from an eager run of the first input, the replay's own placeholders), so the
    values are compared all the same.
    """
    if spec.value_dependent or device == "meta":
        return "-"
    torch.manual_seed(1)
    second = _to(device, spec.inputs())
    a2, k2 = second
    if all(torch.equal(x, y) for x, y in zip(tensors_in(first), tensors_in(second), strict=True)):
        return "the second input equals the first: make the spec's inputs random"
    found: list[str] = []
    try:
        gm = g.to_fx(model)
    except Exception as exc:  # noqa: BLE001 - reported, then built as verify builds it
        found.append(f"to_fx(model) refuses: {_first_lines(exc)}")
        try:
            gm = g.to_fx(model, constants=_constant_values(g, model, *clone_tensors(first)))
        except Exception as exc2:  # noqa: BLE001
            return "; ".join(found + [f"with eager constants too: {_first_lines(exc2)}"])
        found.append("with the first input's eager constants")
    state = ModuleState(model)  # both runs start from it (train-mode BatchNorm moves its running stats)
    torch.manual_seed(2)
    want = model(*clone_tensors(a2), **clone_tensors(k2))
    state.restore()
    torch.manual_seed(2)
    try:
        got = gm(*clone_tensors(a2), **clone_tensors(k2))
    except TypeError as exc:  # the replay's signature is not the forward's: call its placeholders
        found.append(f"gm(*args, **kwargs) raised {_first_lines(exc)}; called with the positional tensors")
        try:
            got = gm(*dict.fromkeys(tensors_in(clone_tensors(a2))))
        except Exception as exc2:  # noqa: BLE001
            return "; ".join(found + [f"then {_first_lines(exc2)}"])
    except Exception as exc:  # noqa: BLE001
        return "; ".join(found + [f"the replay raised {_first_lines(exc)}"])
    finally:
        state.restore()
    result = _same_tensors(got, want)
    return "ok" if not found and result == "ok" else "; ".join(found + [result])


def _same_tensors(got: Any, want: Any) -> str:
    """``ok`` when the tensors of both outputs agree in order (values; on meta shapes and dtypes)."""
    g_, w_ = list(dict.fromkeys(tensors_in(got))), list(dict.fromkeys(tensors_in(want)))
    if len(g_) != len(w_):
        return f"the replay returned {len(g_)} tensors, the model {len(w_)}"
    worst = 0.0
    for i, (a, b) in enumerate(zip(g_, w_, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output tensor {i}: {a.dtype} {tuple(a.shape)} vs the model's {b.dtype} {tuple(b.shape)}"
        if a.device.type == "meta" or b.device.type == "meta":
            continue
        if not torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-4, atol=1e-5, equal_nan=True):
            worst = max(worst, float((a.detach().double() - b.detach().double()).abs().max()))
    return "ok" if worst == 0.0 else f"values differ from the model's on it (max abs diff {worst:.3g})"
