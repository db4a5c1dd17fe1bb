"""``DeviceSpec.calibrate()``: measure the device at hand (matmul per dtype, convolution, attention, memory-bound
kernels, per-op overhead) at several sizes, so that its efficiency curves come from measurement."""

from __future__ import annotations

import datetime
import os
import platform
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..errors import SpecError
from ._fit import Sample, fit
from ._spec import DeviceSpec

aten = torch.ops.aten
Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Plan:
    """How long calibration may take: ``repeat`` timings per size (the median counts), each of enough calls to
    last ``target`` seconds; a size whose one call would pass ``cap`` seconds is not run."""

    repeat: int
    target: float
    cap: float
    largest: int  # log2 of the largest memory-bound tensor's elements
    matmul: tuple[int, ...]
    skinny: tuple[tuple[int, int, int], ...] = ()  # (m, k, n) GEMMs beside the squares: the shape axis's rows
    fresh: tuple[int, ...] = ()  # log2 of the elements of the new outputs timed against written ones


CPU = {False: Plan(3, 2e-3, 0.25, 22, (32, 64, 128, 256, 512, 1024),
                   ((64, 512, 512), (64, 2048, 2048), (256, 1024, 1024), (256, 768, 16384)), (20, 22, 24, 25)),
       True: Plan(2, 1e-3, 0.1, 20, (32, 64, 128, 256, 512),
                  ((64, 512, 512), (64, 2048, 2048), (256, 1024, 1024), (256, 768, 16384)), (22, 24))}
CUDA = {False: Plan(5, 2e-3, 0.3, 28, (128, 256, 512, 1024, 2048, 4096, 8192),
                    ((64, 1024, 1024), (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 32768), (1024, 8192, 8192))),
        True: Plan(3, 1e-3, 0.1, 26, (256, 1024, 4096, 8192),
                   ((64, 1024, 1024), (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 32768)))}
"""The CPU's ``fresh`` ladder runs past glibc's mmap threshold (32 MB at most: 2^23 float32 elements; at 32 MB itself
the heap's history decides, so no rung sits there); a GPU's caching allocator reuses its blocks, so CUDA times none."""


class Clock:
    """Seconds per call of ``fn`` run ``k`` times back to back (``k`` at most ``most``): the wall clock on the CPU."""

    most = 10_000

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def per_call(self, fn: Callable[[], Any], k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        return (time.perf_counter() - t0) / k

    def sync(self) -> None:
        pass


class CudaClock(Clock):
    """CUDA events around ``k`` calls queued behind some milliseconds of matmuls, so the GPU runs them back to
    back and the events time the kernels alone, not their launches (the per-op overhead is measured apart);
    ``k`` stays small enough (``most``) for the queue not to run dry while the host launches them."""

    most = 100

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self._filler = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)

    def per_call(self, fn: Callable[[], Any], k: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(8):  # some milliseconds of work ahead of the timed calls: the CPU gets ahead
            self._filler @ self._filler
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / k

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)


def calibrate(device: str | torch.device | None = None, *, threads: int | None = None, quick: bool = False,
              repeat: int | None = None, name: str | None = None, log: Log | None = None) -> DeviceSpec:
    """Measure ``device`` (default: CUDA if there is one, else the CPU) and return its ``DeviceSpec``.

    On the CPU ``threads`` (default ``torch.get_num_threads()``) is set for the run and put back after;
    ``quick`` runs fewer sizes and repeats (a few seconds), ``repeat`` sets the timings per size (the least
    counts);
    ``log`` gets one line per measured kernel.
    """
    dev = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    if dev.type not in ("cpu", "cuda"):
        raise SpecError(f"calibrate measures the CPU or a CUDA device, not {dev.type!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SpecError("calibrate --device cuda: torch sees no CUDA device here (use --device cpu)")
    threads = torch.get_num_threads() if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SpecError(f"threads takes a whole number >= 1, not {threads!r}")
    plan = (CUDA if dev.type == "cuda" else CPU)[quick]
    if repeat is not None:
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise SpecError(f"repeat takes a whole number >= 1, not {repeat!r}")
        plan = Plan(repeat, plan.target, plan.cap, plan.largest, plan.matmul, plan.skinny, plan.fresh)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            clock: Clock = CudaClock(dev) if dev.type == "cuda" else Clock(dev)
            overhead = _overhead(dev, plan)
            say = log or (lambda line: None)
            say(f"per-op overhead (aten.add of one element): {overhead * 1e6:.2f} us")
            samples = []
            for sample in _samples(clock, plan):
                say(str(sample))
                samples.append(sample)
    finally:
        torch.set_num_threads(before)
    host = socket.gethostname() or "localhost"
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    source = (f"measured by dispatchtrace calibrate on {host}, {when}, torch {torch.__version__}, "
              f"{threads} thread(s)")
    primary = "bfloat16" if dev.type == "cuda" else "float32"
    details = {"peak_flops": f"{source}: the best aten.mm rate of each dtype over square sizes",
               "memory_bandwidth": f"{source}: the best rate of the memory-bound kernels (on a CPU, in cache)",
               "launch_overhead": f"{source}: aten.add of one element, per call",
               "compute_efficiency": f"{source}: {primary} matmul (square and skinny: by FLOPs and the smallest "
                                     "dimension), convolution (3x3 and 1x1: by FLOPs and the output positions) and "
                                     "SDPA rates over the peak"}
    details["kernel_efficiency"] = f"{source}: each memory-bound kernel's rates over the bandwidth"
    if plan.fresh:
        details["fresh_output"] = (f"{source}: aten.add into a new tensor less aten.add into one written before, per "
                                   "byte of output")
    fused = _dropout_fused(dev)
    details["attention_dropout_fused"] = f"{source}: torch's SDPA backend choice for a training call with dropout"
    return fit(samples, name=name or f"{host}-{dev.type}", title=_title(dev, threads), overhead=overhead,
               included=0.0 if dev.type == "cuda" else overhead, memory=_memory(dev), primary=primary, source=source,
               details=details, attention_dropout_fused=fused)


def _dropout_fused(dev: torch.device) -> bool:
    """Whether torch runs ``scaled_dot_product_attention`` with dropout, in training, as a fused kernel on ``dev``
    (its backend choice, ``torch._fused_sdp_choice``: 0 is the math path); True where torch cannot say."""
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    q = torch.zeros(1, 8, 128, 64, device=dev, dtype=dtype, requires_grad=True)
    try:
        return int(torch._fused_sdp_choice(q, q, q, None, 0.1, True)) != 0
    except (AttributeError, RuntimeError, TypeError):
        return True


def _samples(clock: Clock, plan: Plan) -> Iterator[Sample]:
    dev = clock.device
    cuda = dev.type == "cuda"
    dtypes = ["float32", "tfloat32", "bfloat16", "float16", "float64"] if cuda else ["float32", "bfloat16", "float64"]
    primary = torch.bfloat16 if cuda else torch.float32
    name = str(primary).removeprefix("torch.")
    for dtype in dtypes:
        last = 0.0  # FLOP/s of the size before: rates fall with size where a dtype has no blocked kernel
        shapes = [(n, n, n) for n in plan.matmul] + (list(plan.skinny) if dtype == name else [])
        for m, kk, n in shapes:
            flops = 2.0 * m * kk * n
            if flops > 2.0 * 256**3 and flops > plan.cap * last:  # this size would take too long at the last rate
                if m == kk == n:
                    continue
                break
            dt = getattr(torch, "float32" if dtype == "tfloat32" else dtype)
            a, b = torch.randn(m, kk, device=dev, dtype=dt), torch.randn(kk, n, device=dev, dtype=dt)
            with _tf32(cuda and dtype == "tfloat32"):
                s = _measure(clock, plan, lambda a=a, b=b: aten.mm.default(a, b))
            last = max(last, flops / s)
            yield Sample(kernel=f"mm {dtype} {m}x{kk}x{n}", op_class="matmul", dtype=dtype, size=flops, seconds=s,
                         step=(m * 10**5 + kk) * 10**5 + n, shape=min(m, kk, n))
    batch = 8 if cuda else 1
    steps = ((8, 28), (16, 28), (32, 28), (64, 56), (128, 28), (256, 14), (512, 7), (16, 56), (64, 14), (64, 7))
    for c, hw in steps + (((512, 28),) if cuda else ()):
        # a bottleneck's three shapes at one step: 3x3 c->c, 1x1 4c->c, 1x1 c->4c (ResNet's stage shapes among them,
        # and smaller channel counts at each of their output sizes: the rows of the shape axis, by output positions)
        for k, cin, cout in ((3, c, c), (1, 4 * c, c), (1, c, 4 * c)):
            x = torch.randn(batch, cin, hw, hw, device=dev, dtype=primary)
            w = torch.randn(cout, cin, k, k, device=dev, dtype=primary)
            pad = [k // 2, k // 2]
            s = _measure(clock, plan, lambda x=x, w=w, pad=pad: aten.convolution.default(
                x, w, None, [1, 1], pad, [1, 1], False, [0, 0], 1))
            yield Sample(kernel=f"conv{k}x{k} {name} {batch}x{cin}x{hw}x{hw} -> {cout}", op_class="convolution",
                         dtype=name, size=2.0 * batch * cin * cout * hw * hw * k * k, seconds=s, step=c * 1000 + hw,
                         shape=batch * hw * hw)
    heads, dim = (16, 128) if cuda else (8, 64)
    for length in (256, 1024, 4096) if cuda else (64, 128, 256, 512):
        q, k, v = (torch.randn(batch, heads, length, dim, device=dev, dtype=primary) for _ in range(3))
        s = _measure(clock, plan, lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(q, k, v))
        yield Sample(kernel=f"sdpa {name} {batch}x{heads}x{length}x{dim}", op_class="attention", dtype=name,
                     size=4.0 * batch * heads * length * length * dim, seconds=s, step=length)
    yield from _memory_bound(clock, plan)


ONLY_OWN = frozenset({"tanh", "exp", "bernoulli_"})
"""Kernels calibrate times for their own curve (``DeviceSpec.kernel_efficiency``) only, not their class's."""


def _memory_bound(clock: Clock, plan: Plan) -> Iterator[Sample]:
    dev = clock.device
    for log2 in range(8, plan.largest + 1, 2):
        n = 2**log2
        x, y, z = torch.randn(n, device=dev), torch.randn(n, device=dev), torch.empty(n, device=dev)
        cols = 256 if n >= 2**16 else 64
        rows = n // cols
        m = x.view(rows, cols)
        ones, zeros = torch.ones(cols, device=dev), torch.zeros(cols, device=dev)
        side = int((n // 64) ** 0.5)
        img = torch.randn(1, 64, side, side, device=dev)
        chans = torch.ones(64, device=dev)
        nb = 4 * n
        # (what the log says, the ATen kernel, its class, bytes read and written, the call); the class's curve is
        # the median of its kernels; ``ONLY_OWN`` ones make their own curve alone (compute-bound on a CPU: tanh,
        # exp and random numbers run at a few GB/s, far below add's, and would drag the class's curve down)
        kernels: list[tuple[str, str, str, float, Callable[[], Any]]] = [
            ("add", "add", "elementwise", 3 * nb, partial(aten.add.Tensor, x, y)),
            ("relu", "relu", "elementwise", 2 * nb, partial(aten.relu.default, x)),
            ("gelu", "gelu", "elementwise", 2 * nb, partial(aten.gelu.default, x)),
            ("tanh", "tanh", "elementwise", 2 * nb, partial(aten.tanh.default, x)),
            ("exp", "exp", "elementwise", 2 * nb, partial(aten.exp.default, x)),
            ("bernoulli_", "bernoulli_", "elementwise", 2 * nb, partial(aten.bernoulli_.float, z, 0.9)),
            ("clone", "clone", "copy", 2 * nb, partial(aten.clone.default, x)),
            ("cat", "cat", "copy", 4 * nb, partial(aten.cat.default, [x, y])),
            ("sum(dim=-1)", "sum", "reduction", nb + 4 * rows, partial(aten.sum.dim_IntList, m, [-1])),
            ("softmax", "_softmax", "reduction", 2 * nb, partial(aten._softmax.default, m, -1, False)),
            ("layer_norm", "native_layer_norm", "reduction", 2 * nb,
             partial(aten.native_layer_norm.default, m, [cols], ones, zeros, 1e-5)),
            ("batch_norm (eval)", "_native_batch_norm_legit_no_training", "reduction", 2 * 4 * img.numel(),
             partial(aten._native_batch_norm_legit_no_training.default, img, chans, chans, chans, chans, 0.1, 1e-5)),
            ("max_pool2d 3x3/2", "max_pool2d_with_indices", "pooling", 4 * img.numel() + (4 + 8) * img.numel() / 4,
             partial(aten.max_pool2d_with_indices.default, img, [3, 3], [2, 2], [1, 1])),
            ("avg_pool2d 3x3/2", "avg_pool2d", "pooling", 4 * img.numel() * (1 + 1 / 4),
             partial(aten.avg_pool2d.default, img, [3, 3], [2, 2], [1, 1])),
        ]
        for kernel, name, op_class, nbytes, fn in kernels:
            s = _measure(clock, plan, fn)
            yield Sample(kernel=f"{kernel} float32 {_elements(n)}", op_class=op_class, dtype="float32", size=nbytes,
                         seconds=s, step=log2, aten=name, typical=name not in ONLY_OWN)
    if plan.fresh:
        # glibc raises its mmap threshold to the size of each mmapped block freed, up to 32 MB: a process that has
        # run a model has freed large tensors, so smaller outputs reuse the heap. One such block freed first puts
        # calibrate in that steady state, whatever ran before it in this process.
        torch.empty(2**23 - 2**12, device=dev)  # 16 kB under 32 MB, freed at once
    steady = Plan(max(plan.repeat, 3), plan.target, plan.cap, plan.largest, plan.matmul)  # the first calls grow the heap
    for log2 in plan.fresh:  # the same add into a new output and into one written before: the difference is the pages
        n = 2**log2
        x, y, z = torch.randn(n, device=dev), torch.randn(n, device=dev), torch.empty(n, device=dev)
        for op_class, fn in (("fresh", partial(aten.add.Tensor, x, y)), ("written", partial(aten.add.out, x, y, out=z))):
            s = _measure(clock, steady, fn)
            what = "into a new output" if op_class == "fresh" else "into a written output"
            yield Sample(kernel=f"add {what} float32 {_elements(n)}", op_class=op_class, dtype="float32", size=4 * n,
                         seconds=s, step=log2)


def _measure(clock: Clock, plan: Plan, fn: Callable[[], Any]) -> float:
    """The least seconds per call of ``fn`` over ``plan.repeat`` timings, after one warm-up call (the least: a
    machine's other work only ever slows a timing down)."""
    fn()
    clock.sync()
    once = clock.per_call(fn, 1)
    k = max(1, min(clock.most, int(plan.target / max(once, 1e-7))))
    return min(clock.per_call(fn, k) for _ in range(plan.repeat))


def _overhead(dev: torch.device, plan: Plan) -> float:
    """The least seconds per call of ``aten.add`` on one-element tensors over a few runs, by the wall clock
    (on CUDA: the host's launch rate, the GPU idle in between)."""
    x = torch.ones(1, device=dev)
    add = aten.add.Tensor
    add(x, x)
    runs = []
    for _ in range(max(plan.repeat, 3)):
        t0 = time.perf_counter()
        for _ in range(2000):
            add(x, x)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        runs.append((time.perf_counter() - t0) / 2000)
    return min(runs)


class _tf32:
    """TF32 matmuls on CUDA inside the block (``torch.backends.cuda.matmul.allow_tf32``), put back after."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.before = torch.backends.cuda.matmul.allow_tf32

    def __enter__(self) -> None:
        if self.on:
            torch.backends.cuda.matmul.allow_tf32 = True

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.before


def _title(dev: torch.device, threads: int) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({threads} thread{'s' if threads != 1 else ''})"


def _memory(dev: torch.device) -> float | None:
    if dev.type == "cuda":
        return float(torch.cuda.get_device_properties(dev).total_memory)
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _elements(n: int) -> str:
    return f"2^{n.bit_length() - 1} elements"
