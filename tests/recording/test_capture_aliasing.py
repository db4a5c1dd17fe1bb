"""Views, in-place writes and out= give the right producers, versions and storages."""

from __future__ import annotations

import torch
import torch.nn as nn

import dispatchtrace as dt


def _run(fn, *args, model=None):
    with dt.capture(model) as g:
        out = fn(*args)
    return g, out


def _op(g: dt.Graph, target: str, n: int = 0) -> dt.Op:
    return [op for op in g.ops if op.target == target][n]


def test_view_shares_storage_and_depends_on_its_base() -> None:
    def f(x):
        y = x * 2
        return y.view(-1).sum()

    g, _ = _run(f, torch.ones(2, 3))
    mul, view, total = g.ops
    assert view.target == "aten.view.default" and view.is_view and not mul.is_view
    assert view.producers == (mul,) and total.producers == (view,)
    assert view.outputs[0].storage == mul.outputs[0].storage
    assert view.outputs[0].producer is view
    assert mul.users == (view,)


def test_inplace_relu_bumps_version_and_becomes_the_producer() -> None:
    def f(x):
        y = x + 1
        torch.relu_(y)
        return y * 3

    g, _ = _run(f, torch.ones(2))
    add, relu, mul = g.ops
    assert relu.mutated == relu.outputs and relu.outputs[0].version == 1
    assert relu.inputs[0].version == 0 and relu.inputs[0].producer is add
    assert not relu.is_view
    assert mul.producers == (relu,)
    assert mul.inputs[0] is relu.outputs[0]


def test_residual_iadd_depends_on_both_operands() -> None:
    def f(a, b):
        out = a * 2
        identity = b + 0
        out += identity
        return out.relu()

    g, _ = _run(f, torch.ones(2), torch.ones(2))
    mul, add0, iadd, relu = g.ops
    assert iadd.target == "aten.add_.Tensor"
    assert set(iadd.producers) == {mul, add0}
    assert iadd.mutated[0].storage == mul.outputs[0].storage
    assert relu.producers == (iadd,)


def test_setitem_through_a_view_links_later_readers_to_the_write() -> None:
    def f(x, y):
        z = x * 1
        z[..., 0] = y  # `...`, not `:` (torch 2.8 dispatches a `:` as a whole-dimension slice before the select)
        return z.sum()

    g, _ = _run(f, torch.ones(3, 2), torch.zeros(3))
    mul, select, copy, total = g.ops
    assert (select.target, copy.target) == ("aten.select.int", "aten.copy_.default")
    assert select.is_view and select.producers == (mul,)
    assert set(copy.producers) == {select} and copy.inputs[1].kind == "input"
    assert copy.mutated[0].storage == mul.outputs[0].storage
    # z itself was never returned by copy_: its producer stays mul, its version moved on
    assert total.inputs[0].producer is mul and total.inputs[0].version == 1
    assert set(total.producers) == {mul, copy}


def test_disjoint_writes_are_each_a_dependency_of_a_read_of_both() -> None:
    def f(x):
        z = x * 1
        a, b = z[0], z[1]
        a.copy_(torch.zeros(2))
        b.copy_(torch.ones(2))
        return z.sum()

    g, _ = _run(f, torch.ones(2, 2))
    g.lint()
    copies = [op for op in g.ops if op.target == "aten.copy_.default"]
    total = g.ops[-1]
    assert total.producers == (g.ops[0], copies[1], copies[0])  # the last writer of each byte, newest first
    assert copies[0] not in copies[1].producers  # b's bytes are not a's: the second write does not read the first


def test_a_write_covering_an_earlier_one_hides_it() -> None:
    def f(x):
        z = x * 1
        z[0].add_(1)
        z.view(-1).mul_(2)  # every byte, through a view: the add's bytes are read by the mul_, not after it
        return z.sum()

    g, _ = _run(f, torch.ones(2, 2))
    g.lint()
    add, view, mul_ = _op(g, "aten.add_.Tensor"), _op(g, "aten.view.default"), _op(g, "aten.mul_.Tensor")
    assert add in view.producers and mul_.producers == (view,)  # the view made after the add carries it
    assert g.ops[-1].producers == (g.ops[0], mul_)


def test_a_contiguous_slice_reads_only_its_own_bytes() -> None:
    def f(x):
        z = x * 1
        z[0:2].add_(1)
        return z[2:4].sum(), z[1:3].sum()

    g, _ = _run(f, torch.ones(4, 3))
    g.lint()
    add = _op(g, "aten.add_.Tensor")
    disjoint, overlapping = [op for op in g.ops if op.target == "aten.sum.default"]
    assert add not in disjoint.producers and add not in disjoint.producers[0].producers
    assert add in overlapping.producers[0].producers  # the slice op (a view) reads the written row 1


def test_a_strided_view_reads_exactly_its_bytes() -> None:
    def f(x):
        z = x * 1
        z[..., 0].add_(1)  # `...`: one select on every torch (2.8 makes `:` a slice first)
        a = z[..., 1].sum()  # interleaved columns: their intervals overlap, their bytes do not
        return a + z[..., 0].sum()  # the written column itself: the edge

    g, _ = _run(f, torch.ones(3, 2))
    g.lint()
    add = _op(g, "aten.add_.Tensor")
    selects = [op for op in g.ops if op.target == "aten.select.int"]
    assert [add in op.producers for op in selects] == [False, False, True]


def test_windows_that_overlap_themselves_keep_the_conservative_interval() -> None:
    def f(x):
        z = x * 1
        w = z.view(-1).as_strided((3, 2), (2, 2), 1)  # elements 1, 3, 3, 5, 5, 7: two dimensions, one stride
        z[:, 0].add_(1)  # elements 0, 2, 4, 6
        return w.sum()  # no box in any strides: the interval [1, 7] meets the column

    g, _ = _run(f, torch.ones(4, 2))
    g.lint()
    assert _op(g, "aten.add_.Tensor") in g.ops[-1].producers


def test_a_view_made_after_a_write_carries_it() -> None:
    def f(x):
        z = x * 1
        z[0].add_(1)
        v = z[0]  # made after the write: the select reads the written bytes
        return v * 3

    g, _ = _run(f, torch.ones(2, 2))
    g.lint()
    add = _op(g, "aten.add_.Tensor")
    select = [op for op in g.ops if op.target == "aten.select.int"][-1]
    assert add in select.producers and g.ops[-1].producers == (select,)


def test_set_moves_a_tensor_to_the_other_storage() -> None:
    def f(x):
        a, y = x * 1, x * 2
        a.set_(y)
        a_old_view = y  # noqa: F841 - y and a now share one storage
        y.add_(1)
        return a * 3

    g, _ = _run(f, torch.ones(3))
    g.lint()
    set_, add, mul = _op(g, "aten.set_.source_Tensor"), _op(g, "aten.add_.Tensor"), g.ops[-1]
    assert set_.mutated[0].storage == add.mutated[0].storage == g.ops[1].outputs[0].storage
    assert set(mul.producers) == {set_, add}
    assert set_ not in add.producers  # set_ writes no byte: readers of y do not depend on it


def test_out_argument_is_a_write() -> None:
    def f(a, b):
        c = torch.empty(2)
        torch.add(a, b, out=c)
        return c * 2

    g, _ = _run(f, torch.ones(2), torch.ones(2))
    empty, add, mul = g.ops
    assert add.target == "aten.add.out"
    assert [r.storage for r in add.mutated] == [empty.outputs[0].storage]
    assert add.outputs == add.mutated and add.outputs[0].version == 1
    assert set(add.producers) == {empty}  # a and b are graph inputs
    assert mul.producers == (add,)


def test_index_put_is_a_write() -> None:
    def f(x, v):
        z = x.clone()
        z[torch.tensor([0, 2])] = v
        return z + 1

    g, _ = _run(f, torch.zeros(4), torch.ones(2))
    put = next(op for op in g.ops if op.target.startswith("aten.index_put_"))
    clone = _op(g, "aten.clone.default")
    assert put.mutated[0].storage == clone.outputs[0].storage
    assert clone in put.producers
    assert g.ops[-1].producers == (put,)


def test_batchnorm_running_stats_are_written_in_training() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3)

        def forward(self, x):
            y = self.bn(x)
            return y, self.bn.running_mean * 1

    model = M().train()
    g, _ = _run(model, torch.randn(4, 3), model=model)
    bn_op = next(op for op in g.ops if "batch_norm" in op.target)
    assert {r.name for r in bn_op.mutated} == {"bn.running_mean", "bn.running_var"}
    assert all(r.kind == "buffer" and r.version == 1 for r in bn_op.mutated)
    tracked = _op(g, "aten.add_.Tensor")
    assert tracked.mutated[0].name == "bn.num_batches_tracked"
    reader = g.ops[-1]
    assert reader.inputs[0].name == "bn.running_mean" and reader.inputs[0].version == 1
    assert reader.producers == (bn_op,)
    # in eval mode nothing is written
    model.eval()
    g2, _ = _run(model, torch.randn(4, 3), model=model)
    assert all(not op.mutated for op in g2.ops)


def test_storage_ids_stay_unique_when_the_allocator_reuses_addresses() -> None:
    ptrs: list[int] = []

    def f(x):
        outs = []
        for i in range(20):
            t = torch.full((4096,), float(i))
            ptrs.append(t.data_ptr())
            outs.append(t.sum())
            del t
        return torch.stack(outs) + x

    g, _ = _run(f, torch.zeros(20))
    fulls = [op for op in g.ops if op.target == "aten.full.default"]
    assert len(set(ptrs)) < len(ptrs), "the allocator did not reuse memory; the test proves nothing"
    assert len({op.outputs[0].storage for op in fulls}) == 20
    sums = [op for op in g.ops if op.target == "aten.sum.default"]
    assert [s.producers for s in sums] == [(f,) for f in fulls]


def test_factories_inside_forward_are_ops_and_literals_are_constants() -> None:
    class M(nn.Module):
        def forward(self, x):
            return x + torch.zeros(3) + torch.arange(3) + torch.tensor([1.0, 2.0, 3.0])

    m = M()
    g, _ = _run(m, torch.ones(3), model=m)
    targets = [op.target for op in g.ops]
    assert "aten.zeros.default" in targets and "aten.arange.default" in targets
    lift = _op(g, "aten.lift_fresh.default")
    assert lift.inputs[0].kind == "constant" and lift.inputs[0].name == "_tensor_constant0"
    assert lift.users and lift.users[0].target == "aten.add.Tensor"


def test_kinds_and_names_of_parameters_buffers_inputs() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    g, _ = _run(model, torch.randn(2, 3), model=model)
    names = {r.name: r.kind for op in g.ops for r in op.inputs if r.kind != "activation"}
    assert names == {
        "0.weight": "parameter", "0.bias": "parameter", "input": "input",
        "1.weight": "parameter", "1.bias": "parameter", "1.running_mean": "buffer", "1.running_var": "buffer",
    }
    assert [r.name for r in g.inputs] == ["input"]


def test_later_versions_of_a_multi_output_result_keep_their_slot() -> None:
    def f(x):
        a, b, c = (x * 1).chunk(3)
        b.add_(1)  # bumps the shared storage: a and c get new versions too
        return a + c

    g, _ = _run(f, torch.ones(6))
    chunk = _op(g, "aten.split.Tensor")
    add = g.ops[-1]
    assert [r.slot for r in chunk.outputs] == [0, 1, 2]
    assert [(r.producer, r.slot, r.version) for r in add.inputs] == [(chunk, 0, 1), (chunk, 2, 1)]
    assert str(add).startswith("%add = aten.add.Tensor(%split[0], %split[2])")
