"""The model zoo: real models nobody wrote for dispatchtrace, and the four checks run on each.

Used by ``benchmarks/coverage.py`` (writes ``docs/coverage.md``) and ``tests/test_zoo.py``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import torch
import torch.nn as nn
import torchvision
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt
from dispatchtrace.lint import LintError
from dispatchtrace.verify import check, clone_tensors

Device = Literal["cpu", "meta"]
Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Spec:
    """One zoo entry: how to build the model (``weights=None``) and its small inputs."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], Inputs]
    no_grad: bool = False
    note: str = ""


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
             lambda: (([torch.rand(3, 96, 128)],), {}), note="list-of-dict outputs"),
        Spec("deeplabv3_mobilenet_v3_large",
             lambda: segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None), _image(64),
             note="dict output"),
        Spec("r3d_18", lambda: video.r3d_18(weights=None), lambda: ((torch.randn(1, 3, 4, 32, 32),), {}),
             note="clip 1x3x4x32x32"),
        Spec("raft_small", lambda: optical_flow.raft_small(weights=None),
             lambda: ((torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128)), {"num_flow_updates": 4}),
             note="two 128x128 images (the correlation pyramid needs them), 4 refinement steps"),
        Spec("nn.LSTM", lambda: nn.LSTM(16, 32, num_layers=2), seq(5, 2, 16)),
        Spec("nn.GRU", lambda: nn.GRU(16, 32, num_layers=2, bidirectional=True), seq(5, 2, 16),
             note="bidirectional"),
        Spec("nn.MultiheadAttention", lambda: nn.MultiheadAttention(32, 4), attention(False)),
        Spec("nn.MultiheadAttention (fast path)", lambda: nn.MultiheadAttention(32, 4, batch_first=True),
             attention(True), no_grad=True, note="no_grad, batch_first: fused aten._native_multi_head_attention"),
        Spec("nn.Transformer", lambda: nn.Transformer(32, 4, 2, 2, 64),
             lambda: ((torch.randn(7, 2, 32), torch.randn(5, 2, 32)), {})),
        Spec("nn.Transformer (no_grad)", lambda: nn.Transformer(32, 4, 2, 2, 64, batch_first=True),
             lambda: ((torch.randn(2, 7, 32), torch.randn(2, 5, 32)), {}), no_grad=True,
             note="no_grad, batch_first: encoder fast path"),
    ]


def specs() -> list[Spec]:
    """Every torchvision classification model, then the detection, segmentation, video, flow and nn entries."""
    names = torchvision.models.list_models(module=torchvision.models)
    return [_classification(n) for n in names] + _builtin_specs()


@dataclass
class Row:
    """What the four checks found for one model on one device."""

    name: str
    device: Device
    ops: int = 0
    calls: int = 0
    calls_match: bool = False
    ops_match: bool = False
    lint: str = "not run"
    replay: str = "not run"
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
    """An empty dispatch mode that only counts forward ops: the independent op count."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if torch._C._current_graph_task_id() == -1:
            self.n += 1
        return func(*args, **(kwargs or {}))


def hooked_forward(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[str], int]:
    """Module paths a plain global forward pre-hook sees, and the op count of an empty dispatch mode."""
    paths = {id(m): p for p, m in model.named_modules()}
    seen: list[str] = []
    handle = register_module_forward_pre_hook(lambda m, a: seen.append(paths.get(id(m), type(m).__name__)))
    try:
        with _Count() as count:
            model(*args, **kwargs)
    finally:
        handle.remove()
    return seen, count.n


def _to(device: Device, value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), value)


def run(spec: Spec, device: Device, *, replay: bool = True, repeat: int = 0) -> Row:
    """Build ``spec`` on ``device``, run the four checks; never raises for the model's sake.

    ``repeat`` back-to-back (plain, captured) pairs give the ratio (their median); ``repeat=0``
    (the tests) spends as few forwards as it can: the warm-up is the plain time, one capture.
    """
    row = Row(spec.name, device, note=spec.note)
    torch.manual_seed(0)
    place = torch.device("meta") if device == "meta" else contextlib.nullcontext()
    grad = torch.no_grad() if spec.no_grad else contextlib.nullcontext()
    try:
        with place:
            model = spec.build().eval()
    except Exception:  # noqa: BLE001 - some builders compute sizes with tensors (RegNet): build, then move
        model = spec.build().eval().to(device)
    args, kwargs = _to(device, spec.inputs())
    with place, grad:
        # the first forward warms caches some models fill once (MultiScaleRoIAlign's scales):
        # every run compared below then does the same work
        try:
            t0 = time.perf_counter()
            model(*args, **kwargs)
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
                model(*args, **kwargs)
                plain = time.perf_counter() - t0
                row.plain_s = min(row.plain_s, plain)
            t0 = time.perf_counter()
            with dt.capture(model) as g:
                out = model(*args, **kwargs)
            taken = time.perf_counter() - t0
            row.capture_s = min(row.capture_s, taken)
            if repeat:
                row.pair_ratios.append(taken / plain)
        hooks, count = hooked_forward(model, args, kwargs)
        row.ops, row.calls = len(g.ops), len(g.calls)
        paths = [c.path for c in g.calls]
        row.calls_match = paths == hooks
        row.ops_match = len(g.ops) == count
        if not row.calls_match:
            first = next((i for i, (a, b) in enumerate(zip(paths, hooks)) if a != b), min(len(paths), len(hooks)))
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
        if replay:
            report = check(g, model, out, *before)
            row.replay = "ok" if report else "FAILED"
            if not report:
                row.problems.append(str(report))
    return row
