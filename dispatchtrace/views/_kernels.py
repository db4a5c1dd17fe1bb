"""What one op asks of a device: its class (matmul, convolution, ...), compute dtype, FLOPs and bytes moved.

An estimate charges each op as the kernel the target runs for it: views and allocations are free (no
launch, no bytes); every other op reads its inputs and writes its outputs once. The class picks the
efficiency curve of the device spec (``hardware.OP_CLASSES``): from the op's name, else ATen's own
``pointwise`` and ``reduction`` tags; an op none of these knows is ``"other"``.

>>> work_class("aten.addmm.default"), work_class("aten.max_pool2d_with_indices.default")
('matmul', 'pooling')
>>> work_class("aten.relu.default"), work_class("aten.cat.default"), work_class("aten.empty.memory_format")
('elementwise', 'copy', 'free')
>>> work_class("aten.my_custom_op.default")
'other'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import torch

from ..graph import TensorRef, itemsize, overload_of

if TYPE_CHECKING:
    from ..graph import Op
    from ._costs import Costs

MATMUL = frozenset({"_native_multi_head_attention", "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "_scaled_mm", "_int_mm",
                    "matmul", "linear", "_addmm_activation", "addr", "outer"})
ATTENTION = frozenset({
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention", "_efficient_attention_forward",
    "_flash_attention_forward", "_scaled_dot_product_fused_attention_overrideable",
})
REDUCTION = frozenset({
    "_softmax", "_log_softmax", "_safe_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "native_batch_norm", "native_batch_norm_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
    "native_group_norm", "native_group_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward",
    "cumsum", "cumprod", "logcumsumexp", "topk", "sort", "nll_loss_forward", "nll_loss_backward",
    "nll_loss2d_forward", "nll_loss2d_backward", "embedding_dense_backward", "_embedding_bag",
    "_embedding_bag_backward", "mse_loss", "mse_loss_backward", "cross_entropy_loss", "kthvalue", "median",
})
"""Ops that reduce along a dimension: softmax, norms, losses, scans (pooling, ``*pool*``, is a class of its own)."""
COPY = frozenset({
    "copy_", "_to_copy", "clone", "contiguous", "cat", "stack", "index_select", "gather", "embedding", "index",
    "_unsafe_index", "index_put", "index_put_", "_index_put_impl_", "scatter", "scatter_", "scatter_add",
    "scatter_add_", "scatter_reduce", "repeat", "repeat_interleave", "constant_pad_nd", "slice_scatter",
    "select_scatter", "diagonal_scatter", "as_strided_scatter", "masked_scatter", "flip", "roll", "tril", "triu",
    "zero_", "fill_", "zeros", "ones", "full", "new_zeros", "new_ones", "new_full", "zeros_like", "ones_like",
    "full_like", "scalar_tensor", "arange", "lift_fresh_copy", "_copy_from", "_copy_from_and_resize", "masked_select",
    "nonzero", "where", "index_add", "index_add_", "index_copy", "index_fill", "put", "take", "unfold_backward",
    "im2col", "col2im", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "narrow_copy", "_pad_circular",
    "slice_backward", "select_backward", "diagonal_backward", "as_strided_backward", "unbind_backward",
    "index_select_backward", "gather_backward", "_unsafe_index_put", "index_put_backward",
})
"""Ops that only move or fill bytes: copies, concatenation, gathers and scatters, padding, fills."""
GATHER = frozenset({"embedding", "index_select", "gather", "index", "_unsafe_index", "take", "masked_select",
                    "_embedding_bag"})
"""Ops that read rows of a source picked by indices: they read as many bytes of it as they return."""
FREE = frozenset({"empty", "empty_strided", "new_empty", "new_empty_strided", "empty_like", "resize_", "set_",
                  "lift_fresh", "alias", "detach", "_local_scalar_dense", "record_stream", "_assert_async",
                  "_assert_tensor_metadata", "sym_constrain_range_for_size", "_functional_sym_constrain_range"})
"""Allocations and metadata: no kernel runs (``_local_scalar_dense``, ``.item()``, only waits)."""
ELEMENTWISE = frozenset({"native_dropout", "native_dropout_backward", "bernoulli", "bernoulli_", "normal_", "uniform_",
                         "exponential_", "random_", "rand", "randn", "rand_like", "randn_like", "randint", "randperm",
                         "_fused_dropout", "_masked_scale", "gelu_backward", "silu_backward", "_prelu_kernel"})


MEMORY_BOUND = frozenset({"elementwise", "reduction", "pooling", "copy"})
"""The classes charged by their bytes alone: the time of a few operations per element is within the bytes'."""


def _name(target: str) -> str:
    """``embedding`` of ``aten.embedding.default``."""
    return target.partition(".")[2].partition(".")[0]


def kernel_name(target: str) -> str | None:
    """The name ``DeviceSpec.kernel_efficiency`` keys an ATen op's curve by (``gelu`` of ``aten.gelu.default``);
    ``None`` for an op outside ``aten``.

    >>> kernel_name("aten.max_pool2d_with_indices.default"), kernel_name("mylib.op.default")
    ('max_pool2d_with_indices', None)
    """
    return _name(target) if target.startswith("aten.") else None


@lru_cache(maxsize=4096)
def work_class(target: str) -> str:
    """The op class of an ATen target (``hardware.OP_CLASSES``), or ``"free"`` for an allocation."""
    ns, _, rest = target.partition(".")
    name = rest.partition(".")[0]
    base = name.removesuffix("_backward") if name.endswith("_backward") else name
    if name in FREE or ns == "profiler":  # (``record_function``'s markers run no kernel)
        return "free"
    if name in MATMUL:
        return "matmul"
    if base in ATTENTION or name in ATTENTION:
        return "attention"
    if "convolution" in name or name.startswith(("conv", "_slow_conv", "slow_conv", "thnn_conv", "mkldnn_conv", "_nnpack")):
        return "convolution"
    if name.startswith("_foreach_") or name.startswith("_fused_adam") or name.startswith("_fused_sgd"):
        return "elementwise"  # one launch over all the lists' tensors
    if "pool" in name:  # a window reduction: reads its whole input (its own curve: CPUs run it far slower)
        return "pooling"
    if name in REDUCTION:
        return "reduction"
    if name in COPY or name.startswith(("upsample_", "reflection_pad", "replication_pad")) or name.endswith("_copy"):
        return "copy"
    if name in ELEMENTWISE:
        return "elementwise"
    overload = overload_of(target) if ns == "aten" else None
    if overload is not None:
        tags = overload.tags
        if torch.Tag.pointwise in tags:
            return "elementwise"
        if torch.Tag.reduction in tags:
            return "reduction"
    return "other"


@dataclass(frozen=True, slots=True)
class Work:
    """One op's demand on the device: ``cls`` (an op class, or ``"free"``), ``dtype`` it computes in,
    ``flops`` (``None``: no formula), ``nbytes`` read and written, ``shape`` its value on a compute curve's
    shape axis (``gemm_shape``; ``None`` for other classes), ``fresh`` the bytes of each output it allocates
    (not a view, not written into an input's storage)."""

    cls: str
    dtype: str
    flops: int | None
    nbytes: int
    shape: int | None = None
    fresh: tuple[int, ...] = ()


def compute_dtype(op: Op) -> str:
    """The dtype an op computes in: its first floating-point input's, else its first output's, else float32."""
    for r in op.inputs:
        if r.dtype.startswith(("float", "bfloat", "complex")):
            return r.dtype
    for r in op.outputs:
        return r.dtype
    return "float32"


class Bytes:
    """Bytes each ref occupies in memory (cached by ref): a view reads no more than the tensor it views, so an
    ``expand``ed operand counts its source's bytes (a broadcast reads each element once)."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def of(self, ref: TensorRef) -> int:
        n = self._seen.get(ref.id)
        if n is None:
            n = self._seen[ref.id] = self._resident(ref)
        return n

    def _resident(self, ref: TensorRef) -> int:
        size = itemsize(ref.dtype) or 0
        best = ref.numel
        r, hops = ref, 0
        while r.producer is not None and r.producer.is_view and r.producer.inputs and hops < 16:
            r, hops = r.producer.inputs[0], hops + 1
            n = r.numel
            if n is not None and (best is None or n < best):
                best = n
        return (best or 0) * size

    def moved(self, op: Op) -> int:
        """Inputs read plus outputs and in-place writes, each tensor once; a gather (``embedding``,
        ``index_select``, ...) reads only the rows it returns, not its whole source."""
        seen: set[int] = set()
        total = 0
        of = self.of
        inputs = op.inputs
        if inputs and op.outputs and _name(op.target) in GATHER:
            seen.add(inputs[0].id)  # the source: embedding's weight, index_select's self, ...
            total += sum(of(r) for r in op.outputs)  # the rows read: as many bytes as the result
        for r in inputs:
            if r.id not in seen:
                seen.add(r.id)
                total += of(r)
        for r in (*op.outputs, *op.mutated):
            if r.id not in seen:
                seen.add(r.id)
                total += of(r)
        return total


def op_work(op: Op, costs: Costs, nbytes: Bytes) -> Work:
    """What ``op`` asks of the device on its own (fused regions are charged by ``_attention``)."""
    cls = "free" if op.is_view else work_class(op.target)
    if cls == "free":
        return Work("free", "", 0, 0)
    # memory-bound classes never read their FLOPs (and a decomposition, batch norm's, costs ms to count)
    flops = None if cls in MEMORY_BOUND else costs.op(op).flops
    if cls == "attention":
        flops = attention_flops(op)
    elif op.target == "aten._native_multi_head_attention.default":
        flops = _mha_flops(op)
    taken = {r.storage for r in (*op.inputs, *op.mutated)}
    fresh = tuple(nbytes.of(r) for r in op.outputs if r.storage not in taken)
    return Work(cls, compute_dtype(op), flops, nbytes.moved(op), gemm_shape(op, cls), fresh)


_ADDED = frozenset({"addmm", "baddbmm", "addbmm", "addmv", "addr", "_addmm_activation"})
"""Matmuls whose first tensor input is the term added to the product, not a factor."""


def gemm_shape(op: Op, cls: str) -> int | None:
    """The op's value on a compute curve's shape axis: for a matmul the smallest of the GEMM's M, N and K (a
    skinny product runs short of rows or columns to fill the kernel's tiles), for a convolution its output
    positions N·Ho·Wo (the GEMM's M, what a small feature map runs short of); ``None`` for other classes or
    symbolic shapes.

    >>> import torch, dispatchtrace as dt
    >>> conv, x = torch.nn.Conv2d(512, 512, 3, padding=1), torch.ones(1, 512, 7, 7)
    >>> with dt.capture(conv) as g:
    ...     y = conv(x) @ torch.ones(7, 3)
    >>> gemm_shape(g.ops[0], "convolution"), [gemm_shape(op, "matmul") for op in g.ops if "mm" in op.target]
    (49, [3])
    """
    if cls == "convolution":
        name = _name(op.target)
        ref = op.inputs[0] if name.endswith("_backward") and op.inputs else op.outputs[0] if op.outputs else None
        if ref is None or len(ref.shape) < 3 or not all(isinstance(d, int) for d in ref.shape):
            return None
        positions = ref.shape[0]
        for d in ref.shape[2:]:
            positions *= d  # type: ignore[operator]
        return positions  # type: ignore[return-value]
    if cls != "matmul":
        return None
    factors = [r for r in op.inputs if len(r.shape) >= 1]
    if _name(op.target) in _ADDED:
        factors = factors[1:]
    if len(factors) < 2:
        return None
    a, b = factors[0].shape, factors[1].shape
    dims = [*a[-2:], *b[-1:]] if len(b) >= 2 else [*a[-2:]] if len(a) >= 2 else [*a[-1:]]
    if len(a) < 2 or len(b) < 2:
        dims.append(1)  # a matrix-vector product: one column
    if not all(isinstance(d, int) for d in dims):
        return None
    return max(1, min(dims))  # type: ignore[type-var]


def _argument(op: Op, name: str, default: object = None) -> object:
    overload = overload_of(op.target)
    if overload is None:
        return default
    for i, a in enumerate(overload._schema.arguments):
        if a.name == name:
            if i < len(op.args) and not a.kwarg_only:
                return op.args[i]
            return op.kwargs.get(name, default)
    return default


def attention_flops(op: Op) -> int | None:
    """A fused attention kernel's FLOPs from its query, key and value shapes: ``2·B·H·Lq·Lk·(D + Dv)`` forward,
    halved when causal, 2.5x that for a backward (as flash-attention counts)."""
    refs = [r for r in op.inputs if r.numel is not None and len(r.shape) >= 2]
    backward = op.target.partition(".")[2].partition(".")[0].endswith("_backward")
    if backward:  # grad_out first, then q, k, v (flash and efficient backward alike)
        refs = refs[1:]
    if len(refs) < 3:
        return None
    q, k, v = refs[:3]
    flops = attention_kernel_flops(q.shape, k.shape, v.shape, bool(_argument(op, "is_causal", False)))
    if flops is None:
        return None
    return int(flops * 2.5) if backward else flops


def attention_kernel_flops(q: tuple[int | str, ...], k: tuple[int | str, ...], v: tuple[int | str, ...],
                           causal: bool) -> int | None:
    """``2·(batch dims of q)·Lq·Lk·(D + Dv)``, halved when causal; ``None`` for a symbolic shape.

    >>> attention_kernel_flops((1, 32, 2048, 128), (1, 8, 2048, 128), (1, 8, 2048, 128), True)
    34359738368
    """
    if not all(isinstance(s, int) for s in (*q, *k, *v)) or len(q) < 2 or len(k) < 2 or len(v) < 1:
        return None
    rows = 1
    for s in q[:-1]:
        rows *= s  # type: ignore[operator]
    flops = 2 * rows * k[-2] * (q[-1] + v[-1])  # type: ignore[operator]
    return flops // 2 if causal else flops


def _mha_flops(op: Op) -> int | None:
    """``nn.MultiheadAttention``'s fast path, one op: the q, k, v projections, attention and the output projection
    (``2·B·L·E·3E + 4·B·L²·E + 2·B·L·E·E`` for self-attention), all matmuls."""
    if len(op.inputs) < 3 or any(not isinstance(s, int) for r in op.inputs[:2] for s in r.shape):
        return None
    q, k = op.inputs[0].shape, op.inputs[1].shape
    if len(q) != 3 or len(k) != 3:
        return None
    b, lq, e = q  # type: ignore[misc]
    lk = k[1]
    return int(2 * b * (lq + 2 * lk) * e * e + 4 * b * lq * lk * e + 2 * b * lq * e * e)  # type: ignore[operator]
