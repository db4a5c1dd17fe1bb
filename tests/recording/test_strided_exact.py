"""Strided views read and write exactly their bytes: every op's producers equal those an independent
reference finds by enumerating the byte indices each op reads and writes (docs/semantics.md).

The reference is a dispatch mode of its own that knows nothing of dispatchtrace's regions: per
storage, an array holding the op that last wrote each byte and the storage version it made; an op
depends on each tensor's producer and on the last writer of every byte it reads, when that write
came after the tensor was made. A view op (its result aliases an argument, it writes nothing) reads
the bytes of its results. RNN cells write their gate chunks in place (``unsafe_split`` of one
``addmm``), column blocks whose intervals interleave: an interval answer gives them false producers.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dispatchtrace as dt


def _bytes(t: torch.Tensor) -> np.ndarray:
    """Every byte index of its storage ``t`` covers, enumerated."""
    item = t.element_size()
    idx = np.array([t.storage_offset()], dtype=np.int64)
    for size, stride in zip(t.shape, t.stride(), strict=True):
        idx = (idx[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).ravel()
    return (idx[:, None] * item + np.arange(item, dtype=np.int64)[None, :]).ravel()


class ExactBytes(TorchDispatchMode):
    """Records each op's target and its true producers (indices into the op sequence)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, set[int]]] = []
        # every storage seen stays alive, so no address is reused (tensors are held weakly: a tensor an op
        # returns that Python holds elsewhere comes back from the dispatcher as a new alias)
        self._keep: list[torch.UntypedStorage] = []
        self._writer: dict[int, np.ndarray] = {}  # storage -> op that last wrote each byte (-1: none)
        self._made: dict[int, np.ndarray] = {}  # storage -> the version that write made
        self._version: dict[int, int] = {}
        self._state: dict[int, tuple[weakref.ref, int | None, int]] = {}  # id(tensor) -> (it, producer, version made at)

    def _storage(self, t: torch.Tensor) -> int:
        st = t.untyped_storage()
        key = st._cdata
        if key not in self._writer:
            self._keep.append(st)
            self._writer[key] = np.full(st.nbytes(), -1, dtype=np.int64)
            self._made[key] = np.zeros(st.nbytes(), dtype=np.int64)
            self._version[key] = 0
        return key

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        flat_args = [a for a in schema.arguments]
        written: list[torch.Tensor] = []
        values = {a.name: v for a, v in zip(flat_args, args, strict=False)} | kwargs
        for a in flat_args:
            if a.alias_info is not None and a.alias_info.is_write and a.name in values:
                written += [t for t in tree_leaves(values[a.name]) if isinstance(t, torch.Tensor)]
        view = not written and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        i = len(self.ops)
        producers: set[int] = set()
        for t in [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]:
            key = self._storage(t)
            state = self._state.get(id(t))
            if state is None or state[0]() is not t:
                state = self._state[id(t)] = (weakref.ref(t), None, self._version[key])
            _, producer, born = state
            if producer is not None:
                producers.add(producer)
            read = [o for o in outs if view and o.untyped_storage()._cdata == key] or [t]
            for r in read:
                b = _bytes(r)
                late = b[self._made[key][b] > born]
                producers.update(int(w) for w in np.unique(self._writer[key][late]))
        for t in written:
            key = self._storage(t)
            self._version[key] += 1
            b = _bytes(t)
            self._writer[key][b] = i
            self._made[key][b] = self._version[key]
        for t in outs:
            key = self._storage(t)
            self._state[id(t)] = (weakref.ref(t), i, self._version[key])
        self.ops.append((str(func), producers))
        return out


def _check(run, *, least: int) -> dt.Graph:  # noqa: ANN001
    """Run ``run`` under a capture and under the reference from the same seed; every op's producers agree."""
    torch.manual_seed(0)
    with dt.capture(saved=False) as g:
        run()
    torch.manual_seed(0)
    with ExactBytes() as ref:
        run()
    assert [op.target for op in g.ops] == [t for t, _ in ref.ops]
    index = {id(op): i for i, op in enumerate(g.ops)}
    wrong = [(i, op.target, sorted(index[id(p)] for p in op.producers), sorted(want))
             for i, (op, (_, want)) in enumerate(zip(g.ops, ref.ops, strict=True))
             if sorted(index[id(p)] for p in op.producers) != sorted(want)]
    assert not wrong, f"{len(wrong)} of {len(g.ops)} ops: (op, target, got, true producers) {wrong[:5]}"
    inplace = sum(op.target.endswith("_.Tensor") or op.target.endswith("_.default") for op in g.ops)
    assert inplace >= least, "the model must write views in place for the check to mean something"
    return g


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_bidirectional_two_layer_gru_has_no_false_producer(grad: bool) -> None:
    torch.manual_seed(0)
    gru, x = nn.GRU(8, 16, num_layers=2, bidirectional=True), torch.randn(3, 2, 8)
    with torch.set_grad_enabled(grad):
        _check(lambda: gru(x), least=10)


@pytest.mark.parametrize("mkldnn", [True, False], ids=["mkldnn", "cells"])
def test_a_two_layer_lstm_has_no_false_producer(mkldnn: bool) -> None:
    """With oneDNN, each layer is one ``mkldnn_rnn_layer``; without, the cells' gate chunks are written in place."""
    torch.manual_seed(0)
    lstm, x = nn.LSTM(8, 16, num_layers=2), torch.randn(4, 2, 8)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=mkldnn):
        _check(lambda: lstm(x), least=0 if mkldnn else 8)


def test_an_lstm_cell_stepped_in_a_loop_has_no_false_producer() -> None:
    torch.manual_seed(0)
    cell, xs = nn.LSTMCell(8, 16), torch.randn(5, 2, 8)

    def run() -> None:
        h = c = torch.zeros(2, 16)
        for x in xs:
            h, c = cell(x, (h, c))

    _check(run, least=0)


def test_a_fused_qkv_split_written_in_place_has_no_false_producer() -> None:
    torch.manual_seed(0)
    qkv_proj, x = nn.Linear(16, 48), torch.randn(2, 5, 16)

    def run() -> None:
        qkv = qkv_proj(x)
        q, k, v = qkv.split(16, dim=-1)  # column blocks of one [2, 5, 48] base
        q.mul_(1 / math.sqrt(16))
        k.add_(1.0)
        heads = v.view(2, 5, 4, 4).transpose(1, 2)  # a transpose of a block, written in place
        heads.relu_()
        qkv[..., 40:].neg_()  # half of v's block: the other half keeps relu_ as its writer
        q.sum(), k.sum(), v[..., :8].sum(), v[..., 8:].sum(), qkv.narrow(-1, 8, 16).sum()
        torch.softmax(q @ k.transpose(-1, -2), -1) @ v

    with torch.no_grad():
        g = _check(run, least=4)
    names = {op.name: op for op in g.ops}
    sums = [op for op in g.ops if op.target == "aten.sum.default"]
    assert [sorted(p.name for p in s.producers) for s in sums][:2] == [["mul_"], ["add_"]]
    assert names["neg_"] in sums[3].producers[0].producers and names["neg_"] not in sums[2].producers[0].producers
