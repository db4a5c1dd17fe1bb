"""SDPA calls a capture device ran as the math path (meta, CPU fallbacks), found in the graph, to charge as flash kernels.

``scaled_dot_product_attention`` is one ATen call that runs as one op on a GPU (a flash, efficient or
cuDNN kernel) but decomposes on meta into the math path: the query scaled, the causal mask built
(``ones``, ``tril``, ``where``), ``bmm``, the mask added, ``_safe_softmax`` (which only this path
calls), dropout, ``bmm``. The C++ call runs its ops back to back, so the region is the contiguous run
from its first op (the query's scaling, or a boolean mask's conversion just before it) to the second
``bmm``'s result; found from each ``_safe_softmax``. A region's backward is every backward op whose
``grad_of`` lies in it.

(A ``TorchFunctionMode`` would mark the calls as they run, but any active mode turns off
``nn.TransformerEncoderLayer``'s and ``nn.MultiheadAttention``'s fast paths, so the capture would
record ops the model does not run without it; finding the regions afterwards changes nothing and
works on saved files too.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..graph import itemsize
from ._kernels import attention_kernel_flops

if TYPE_CHECKING:
    from ..graph import Graph, Op, TensorRef

_MASK_OPS = frozenset({"aten.scalar_tensor.default", "aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther",
                       "aten.where.Scalar", "aten.logical_not.default", "aten.masked_fill.Scalar",
                       "aten.masked_fill_.Scalar", "aten.zeros_like.default", "aten.new_zeros.default",
                       "aten._to_copy.default", "aten.full_like.default"})


@dataclass(frozen=True, slots=True)
class Region:
    """One SDPA call's forward ops ``start..stop-1``, charged as one kernel: ``flops`` (causal halving
    applied), ``nbytes`` (query, key, value, mask, output, and the logsumexp when it has a backward),
    ``dtype``; ``backward`` the indices of its backward ops (``()`` in inference)."""

    start: int
    stop: int
    causal: bool
    flops: int | None
    nbytes: int
    dtype: str
    backward: tuple[int, ...] = ()
    backward_bytes: int = 0


def _through_views(ref: TensorRef, extra: frozenset[str] = frozenset()) -> TensorRef:
    """The tensor ``ref`` views, through views (and ``extra`` targets, e.g. GQA's ``clone``)."""
    hops = 0
    while ref.producer is not None and (ref.producer.is_view or ref.producer.target in extra) and ref.producer.inputs \
            and hops < 16:
        ref, hops = ref.producer.inputs[0], hops + 1
    return ref


def _scaled(ref: TensorRef) -> tuple[TensorRef, Op | None]:
    """The operand before the math path's scaling ``mul``, and that ``mul`` (``None`` when unscaled)."""
    ref = _through_views(ref)
    op = ref.producer
    if op is not None and op.target == "aten.mul.Scalar" and op.inputs:
        return op.inputs[0], op
    return ref, None


def _upcast(ref: TensorRef) -> Op | None:
    """The math path's cast of a half or bfloat16 operand to float32, when ``ref`` is its result."""
    op = ref.producer
    if op is None or op.target != "aten._to_copy.default" or not op.inputs or ref.dtype != "float32":
        return None
    return op if op.inputs[0].dtype in ("bfloat16", "float16") else None


def _bytes(ref: TensorRef) -> int:
    return (ref.numel or 0) * (itemsize(ref.dtype) or 0)


_CLONE = frozenset({"aten.clone.default"})


def regions(graph: Graph) -> list[Region]:
    """The math-path SDPA regions of a capture, in order (none where each SDPA ran as one fused op)."""
    ops = graph.ops
    found: list[Region] = []
    for s in ops:
        if s.target != "aten._safe_softmax.default" or not s.inputs:
            continue
        region = _region(ops, s)
        if region is not None:
            found.append(region)
    if not found:
        return found
    owner: dict[int, int] = {}
    for n, r in enumerate(found):
        for i in range(r.start, r.stop):
            owner[i] = n
    back: dict[int, list[int]] = {}
    for op in ops:
        if op.phase in ("backward", "recompute") and (g := op.grad_of) is not None and g.index in owner:
            back.setdefault(owner[g.index], []).append(op.index)
    out = []
    for n, r in enumerate(found):
        idx = tuple(back.get(n, ()))
        if not idx:
            out.append(r)
            continue
        lse = _lse_bytes(ops[r.start:r.stop])
        out.append(Region(r.start, r.stop, r.causal, r.flops, r.nbytes + lse, r.dtype, idx,
                          r.backward_bytes + lse))
    return out


def _lse_bytes(ops: list[Op]) -> int:
    """The logsumexp a flash forward saves for backward: one float32 per query row (``B·H·Lq``)."""
    for op in ops:
        if op.target == "aten._safe_softmax.default" and op.inputs and op.inputs[0].numel:
            shape = op.inputs[0].shape
            rows = 1
            for d in shape[:-1]:
                rows *= d if isinstance(d, int) else 0
            return rows * 4
    return 0


def _region(ops: list[Op], s: Op) -> Region | None:
    attn = _through_views(s.inputs[0])
    mask: TensorRef | None = None
    p = attn.producer
    if p is not None and p.target.startswith("aten.add") and len(p.inputs) == 2:  # the mask added
        attn, mask = _through_views(p.inputs[0]), p.inputs[1]
        p = attn.producer
    if p is None or p.target != "aten.bmm.default" or len(p.inputs) != 2:
        return None
    b1 = p
    b2 = next((op for op in ops[s.index + 1:s.index + 16] if op.target == "aten.bmm.default"), None)
    if b2 is None or len(b2.inputs) != 2:
        return None
    q, q_mul = _scaled(b1.inputs[0])
    kt, k_mul = _scaled(b1.inputs[1])
    k = _through_views(kt, _CLONE)
    v = _through_views(b2.inputs[1], _CLONE)
    start = min(i for i in (b1.index, q_mul.index if q_mul else None, k_mul.index if k_mul else None) if i is not None)
    # on the CPU and meta the math path computes half and bfloat16 in float32: the upcasts run first
    casts = {}
    for ref in (q, k, v):
        up = _upcast(ref)
        if up is not None:
            casts[up.index] = up.inputs[0]
    while start - 1 in casts:
        start -= 1
    q, k, v = (casts.get(r.producer.index, r) if r.producer is not None else r for r in (q, k, v))
    if mask is not None:  # a boolean mask's conversion runs just before the math path
        ancestors = _ancestors(mask, start - 16)
        while start > 0 and ops[start - 1].index in ancestors and ops[start - 1].target in _MASK_OPS:
            start -= 1
    stop = b2.index + 1
    if stop < len(ops) and ops[stop].is_view and ops[stop].inputs and ops[stop].inputs[0].producer is b2:
        stop += 1
    if casts and stop < len(ops) and ops[stop].target == "aten._to_copy.default" and ops[stop].inputs \
            and ops[stop].inputs[0].producer is ops[stop - 1]:  # the result cast back
        stop += 1
    region_ops = ops[start:stop]
    causal = any(op.target == "aten.tril.default" for op in region_ops)
    out = ops[stop - 1].outputs[0] if ops[stop - 1].outputs else b2.outputs[0]
    user_mask = mask is not None and not causal
    flops = attention_kernel_flops(q.shape, k.shape, v.shape, causal)
    nbytes = _bytes(q) + _bytes(k) + _bytes(v) + _bytes(out) + (_bytes(_origin(mask, start)) if user_mask and mask else 0)
    # flash backward reads q, k, v, out, d_out (and the logsumexp) and writes dq, dk, dv
    backward_bytes = 2 * (_bytes(q) + _bytes(k) + _bytes(v)) + 2 * _bytes(out)
    return Region(start, stop, causal, flops, nbytes, q.dtype, (), backward_bytes)


def _origin(ref: TensorRef, start: int) -> TensorRef:
    """The mask as passed in: back through the conversion ops that ran inside the region."""
    hops = 0
    while ref.producer is not None and ref.producer.index >= start and ref.producer.inputs and hops < 16:
        ref, hops = max(ref.producer.inputs, key=lambda r: r.numel or 0), hops + 1
    return ref


def _ancestors(ref: TensorRef, floor: int) -> set[int]:
    """Indices of the ops that made ``ref``, back to op index ``floor``."""
    seen: set[int] = set()
    todo = [ref.producer] if ref.producer is not None else []
    while todo:
        op = todo.pop()
        if op.index in seen or op.index < floor:
            continue
        seen.add(op.index)
        todo.extend(p for p in op.producers)
    return seen
