"""``g.memory()``: live bytes over the ops, the peak and who holds it, checked against PyTorch's MemTracker."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _ModState

import dispatchtrace as dt
from dispatchtrace.views._costs import tensor_bytes
from dispatchtrace.views._summary import human

CPU = torch.device("cpu")


class Net(nn.Module):
    """Conv, batch norm, in-place ReLU, a residual, a transformer layer (SDPA), a head: each module called once."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.act2 = nn.Hardswish()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.bn(self.conv(x)))
        y = self.act2(self.conv2(y)) + y
        t = self.enc(y.flatten(2).transpose(1, 2))
        return self.fc(t.mean(1))


def _live_by_hand(g: dt.Graph, i: int) -> int:
    """Activation bytes live at op ``i``, from the refs directly: a storage first seen as an op's output
    (a view of a parameter is not one) is live from that op to its last use."""
    born: dict[int, int] = {}
    last: dict[int, int] = {}
    size: dict[int, int] = {}
    seen = {r.storage for r in g.inputs}
    for op in g.ops:
        seen.update(r.storage for r in (*op.inputs, *op.mutated))
        for r in op.outputs:
            if r.storage not in seen:
                born[r.storage] = op.index
                seen.add(r.storage)
        for r in (*op.inputs, *op.outputs, *op.mutated):
            last[r.storage] = op.index
            size[r.storage] = max(size.get(r.storage, 0), tensor_bytes(r) or 0)
    end = len(g.ops) - 1
    for r in g.outputs:
        last[r.storage] = end
    for s in g.saved:
        if s.storage in born:
            last[s.storage] = end
            size[s.storage] = s.bytes
    return sum(size[s] for s, b in born.items() if b <= i <= last[s])


def test_timeline_counts_each_storage_once_from_producer_to_last_use() -> None:
    x = torch.randn(4, 5)
    with dt.capture() as g:
        y = x * 2  # born at mul
        v = y.view(-1)  # the same storage: counted once
        z = v + 1  # y's last use
        w = z.sum()
    m = g.memory()
    assert [op.target for op in g.ops] == ["aten.mul.Tensor", "aten.view.default", "aten.add.Tensor", "aten.sum.default"]
    assert m.baseline == 80  # x, live throughout
    assert m.timeline == (80 + 80, 80 + 80, 80 + 160, 80 + 80 + 4)  # z stays: w reads it; w is kept
    assert (m.peak, m.peak_op.name) == (240, "add")
    assert w is not None


def test_the_peak_is_the_largest_live_set_and_its_holders_add_up() -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(2, 3, 8, 8)
    with dt.capture(net) as g:
        net(x)
    m = g.memory()
    assert len(m.timeline) == len(g.ops) and m.peak == max(m.timeline) and m.peak_op is g.ops[m.timeline.index(m.peak)]
    for i in (0, len(g.ops) // 3, len(g.ops) // 2, len(g.ops) - 1):
        assert m.timeline[i] - m.baseline == _live_by_hand(g, i), i
    assert sum(n for _, n in m.at_peak) == m.peak - m.baseline
    assert [n for _, n in m.at_peak] == sorted((n for _, n in m.at_peak), reverse=True)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    buffers = sum(b.numel() * b.element_size() for b in net.buffers())
    assert m.baseline == params + buffers + x.numel() * 4  # every parameter and buffer is read here
    text = str(m)
    assert text.startswith(f"peak {human(m.peak, 'B')} at %{m.peak_op.name}") and "saved for backward" in text


def _memtracked(net: nn.Module, x: torch.Tensor, backward: bool) -> tuple[dt.Graph, MemTracker]:
    tracker = MemTracker()
    tracker.track_external(net, x)
    with tracker, dt.capture(net) as g:
        out = net(x)
        if backward:
            out.sum().backward()
    g.lint()
    return g, tracker


@pytest.mark.parametrize("backward", [False, True])
@needs_node_hook
def test_retained_bytes_equal_memtrackers_activation_growth_per_call(backward: bool) -> None:
    """MemTracker's ACT bytes after a module's forward minus before it (CPU: no allocator rounding) are the
    activations the call made that outlive it: ``retained``, exactly. Our saved bytes made inside are part of it."""
    torch.manual_seed(0)
    net, x = Net(), torch.randn(2, 3, 8, 8)
    g, tracker = _memtracked(net, x, backward)
    m = g.memory()
    grown = {}
    for call in g.calls:
        snaps = tracker.memory_tracking[call.module].snapshots
        before = snaps[_ModState.PRE_FW][0].get(CPU, {}).get(_MemRefType.ACT, 0)
        after = snaps[_ModState.POST_FW][0].get(CPU, {}).get(_MemRefType.ACT, 0)
        grown[call.label] = after - before
    assert {c.label: m.call(c).retained for c in g.calls} == grown
    assert sum(grown.values()) > 0 and grown["act"] == 0  # an in-place ReLU makes nothing new
    assert m.call(next(c for c in g.calls if c.label == "act")).self_saved > 0  # though it saves its result
    peak = tracker.get_tracker_snapshot("peak")[CPU]
    # parameters, buffers and the input: the same bytes on both sides
    assert m.baseline == peak[_MemRefType.PARAM] + peak[_MemRefType.BUFFER] + peak[_MemRefType.OTH]
    # an eager run frees a tensor no earlier than after its last use: our timeline is a lower bound
    assert m.peak <= peak["Total"]


@needs_node_hook
def test_backward_ops_free_the_activations_they_read() -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(2, 3, 8, 8)
    with dt.capture(net) as g:
        net(x).sum().backward()
    if hasattr(g, "backward_ops"):
        pytest.skip("backward ops are kept apart in g.backward_ops, without arguments: nothing reads the saved "
                    "activations in g.ops yet (runs once backward ops are part of g.ops)")
    m = g.memory()
    backward = [op for op in g.ops if op.phase == "backward"]
    assert backward
    first_backward = backward[0].index
    # backward frees what it read: the step ends with less live than the forward left behind
    assert m.timeline[-1] < m.timeline[first_backward - 1] <= m.peak
    assert m.call(g.root).saved > 0


@needs_node_hook
def test_docs_memory_md_examples_run() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "memory.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fully_connected1 = nn.Linear(256, 512)
        self.fully_connected2 = nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fully_connected2(torch.relu(self.fully_connected1(x)))


@needs_node_hook
def test_the_printed_memory_heads_each_list_and_credits_the_peak_to_its_forward_call() -> None:
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(4, 256)
    with dt.capture(net) as g:
        net(x).square().sum().backward()
    mem = g.memory()
    lines = str(mem).splitlines()
    live = lines.index("activations live at the peak, by the call holding them:")
    saved = lines.index("activations saved for backward, by the call that saved them:")
    assert lines[live + 1:live + 1 + len(mem.at_peak[:10])] == \
        [f"  {human(n, 'B'):>8}  {c.label}{f' ({c.type})' if c.path else ''}" for c, n in mem.at_peak[:10]]
    assert lines[saved - 1].startswith("saved for backward: ")
    below = lines[saved + 1:]
    assert below and all(line.startswith("  ") for line in below)
    for line in below:  # each call's own saved bytes, never a live gradient's
        size, label = line.split(maxsplit=2)[:2], line.split("  ")[-1]
        call = next(c for c in [g.root, *g.calls] if label.startswith(c.label))
        assert " ".join(size) == human(mem.call(call).self_saved, "B")
    peak = mem.peak_op
    assert peak is not None and mem.peak_call is not None
    if peak.phase == "backward" and peak.origin is not None:
        assert mem.peak_call is peak.origin and "<capture>" not in lines[0]
    assert f"%{peak.name} (" in lines[0] and f", {peak.phase})" in lines[0]
