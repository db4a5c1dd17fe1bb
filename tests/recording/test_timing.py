"""``capture(timing=True)``: each op's own time, calls inclusive, phases, meta and fake, the deferred (event) path."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.graph import Call
from dispatchtrace.recording._timing import WALL_EVENTS, Timer, WallEvent
from dispatchtrace.views import phase_graph


def _inclusive(call: Call) -> None:
    """``call.time`` is its own ops' time plus its sub-calls', all the way down."""
    parts = [c.time for c in call.children if isinstance(c, Call) and c.time is not None]
    own = call.self_time
    expected = sum(parts) + (own or 0.0)
    assert call.time is not None
    assert math.isclose(call.time, expected, rel_tol=1e-9, abs_tol=1e-15), call
    for child in call.children:
        if isinstance(child, Call) and child.time is not None:
            _inclusive(child)


class Decoder(nn.Module):
    """A small decoder: embedding, two pre-norm blocks of causal attention and an MLP, a tied head."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.TransformerDecoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        for block in self.blocks:
            h = block(h, h, tgt_mask=mask, tgt_is_causal=True)
        return self.norm(h) @ self.embed.weight.T


def test_resnet50_forward_every_op_timed() -> None:
    torch.manual_seed(0)
    model, x = torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 224, 224)
    with torch.no_grad(), dt.capture(model, timing=True) as g:
        model(x)
    g.lint()
    assert g.timed and not g.notes
    assert all(op.time is not None and op.time >= 0 for op in g.ops)
    assert math.isclose(g.time, sum(op.time for op in g.ops), rel_tol=1e-9)
    assert g.time == g.root.time
    _inclusive(g.root)
    relus = g.calls_of("layer1.0.relu")
    assert [c.self_time for c in relus] == [c.time for c in relus] and all(c.time > 0 for c in relus)
    convs = sum(op.time for op in g.ops if op.target == "aten.convolution.default")
    assert convs > g.time / 2, "ResNet-50's time is mostly its convolutions"
    assert g.phase_times == {"forward": pytest.approx(g.time)}


def test_untimed_capture_has_no_times() -> None:
    lin = nn.Linear(4, 2)
    with dt.capture(lin) as g:
        lin(torch.ones(1, 4))
    assert not g.timed and g.time is None and g.phase_times == {}
    assert all(op.time is None for op in g.ops) and g.calls[0].time is None and g.calls[0].self_time is None


def test_training_step_phases_timed() -> None:
    torch.manual_seed(0)
    model, ids = Decoder(), torch.randint(0, 64, (2, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with dt.capture(model, timing=True) as g:
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 64), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    g.lint()
    assert all(op.time is not None and op.time >= 0 for op in g.ops)
    times = g.phase_times
    assert set(times) == {"forward", "backward", "optimizer"} and all(t > 0 for t in times.values())
    assert math.isclose(sum(times.values()), g.time, rel_tol=1e-9)
    assert math.isclose(times["backward"], sum(op.time for op in g.ops if op.phase == "backward"), rel_tol=1e-9)
    # the backward view: each backward op's time counts toward the forward call it belongs to, as its FLOPs do
    back = phase_graph(g, "backward")
    assert back.timed
    assert math.isclose(back.time, times["backward"], rel_tol=1e-9)
    block = next(c for c in back.calls if c.path == "blocks.0")
    ops = [back.source_op[op] for op in block.all_ops()]
    assert ops and all(op.phase == "backward" for op in ops)
    assert math.isclose(block.time, sum(op.time for op in ops), rel_tol=1e-9)
    _inclusive(back.root)
    everything = phase_graph(g, "all")
    assert math.isclose(everything.time, g.time, rel_tol=1e-9)
    forward = phase_graph(g, "forward")
    assert math.isclose(forward.time, times["forward"], rel_tol=1e-9)


def test_meta_capture_notes_that_nothing_ran() -> None:
    with torch.device("meta"):
        model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()), torch.randn(2, 8)
    with dt.capture(model, timing=True) as g:
        model(x)
    assert g.timed and g.time is None and all(op.time is None for op in g.ops)
    assert g.notes == [f"timing=True: {len(g.ops)} ops ran on meta or fake tensors, where no kernel runs: their "
                       "op.time is None (capture on real tensors to measure time)"]


def test_fake_capture_notes_that_nothing_ran() -> None:
    with FakeTensorMode():
        model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()), torch.randn(2, 8)
        with dt.capture(model, timing=True) as g:
            model(x)
            torch.zeros(3)  # a factory op: no tensor argument, the fake mode's
    assert g.ops and all(op.time is None for op in g.ops)
    assert len(g.notes) == 1 and f"{len(g.ops)} ops ran on meta or fake" in g.notes[0]


def test_deferred_events_path_on_the_cpu() -> None:
    """CUDA's path (an event pair per op, read once at the end) with wall-clock events, on the CPU."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(3, 16)
    timer = Timer({"cpu": WALL_EVENTS})
    cap = dt.capture(model, timing=True)
    cap._timer = timer  # the capture's clock for CPU ops: deferred events, as CUDA's
    with cap as g:
        model(x).sum().backward()
        inside = [op.time for op in g.ops]  # read before the block ends: nothing resolved yet
    assert inside and all(t is None for t in inside), "events are read once, when the capture ends"
    assert all(op.time is not None and op.time >= 0 for op in g.ops)
    assert {op.phase for op in g.ops} == {"forward", "backward"}
    _inclusive(g.root)


def test_wall_event_elapsed_is_milliseconds() -> None:
    start, end = WallEvent(), WallEvent()
    start.ns, end.ns = 1_000_000, 3_500_000
    assert start.elapsed_time(end) == 2.5


def test_timing_with_stats_and_keep() -> None:
    """Timing beside values="stats" and keep=: every op timed, the statistics' own reductions (run with the
    modes set aside, after the op's span) neither ops nor timed."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(64, 64), nn.ReLU()), torch.randn(256, 64)
    with dt.capture(model, timing=True, values="stats", keep="*") as g:
        model(x)
    assert all(op.time is not None for op in g.ops) and g.stats and g.kept
    with dt.capture(model) as plain:
        model(x)
    assert [op.target for op in g.ops] == [op.target for op in plain.ops]  # no statistics' op among them


def test_saved_and_loaded_keeps_times(tmp_path) -> None:
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()), torch.randn(2, 8)
    with dt.capture(model, timing=True) as g:
        model(x).sum().backward()
    g.save(tmp_path / "t.json")
    back = dt.load(tmp_path / "t.json")
    assert back.timed and [op.time for op in back.ops] == [op.time for op in g.ops]
    assert back.calls[0].time == g.calls[0].time and back.phase_times == g.phase_times
    with dt.capture(model) as plain:
        model(x)
    plain.save(tmp_path / "plain.json")
    data = json.loads((tmp_path / "plain.json").read_text())
    assert "times" not in data and "timed" not in data
    assert not dt.load(tmp_path / "plain.json").timed


def test_damaged_times_are_one_line(tmp_path) -> None:
    model = nn.Linear(4, 2)
    with dt.capture(model, timing=True) as g:
        model(torch.ones(1, 4))
    data = json.loads(g.save(tmp_path / "t.json") or (tmp_path / "t.json").read_text())
    data["times"][1] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(dt.FormatError, match=r"times: entry 1 is 'fast', not a number of seconds >= 0 or null"):
        dt.load(tmp_path / "bad.json")
    data["times"] = data["times"][:1]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(dt.FormatError, match="times is not a list of one entry per op"):
        dt.load(tmp_path / "bad.json")


def test_summary_shows_time_own_time_and_share() -> None:
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8)), torch.randn(4, 32)
    with torch.no_grad(), dt.capture(model, timing=True) as g:
        model(x)
    s = g.summary()
    rows = s.rows()
    assert [r["time"] for r in rows] == pytest.approx([c.time for c in g.calls])
    assert [r["self_time"] for r in rows] == pytest.approx([c.self_time for c in g.calls])
    assert [r["time_share"] for r in rows] == pytest.approx([c.time / g.time for c in g.calls])
    assert s.total.time == pytest.approx(g.time)
    assert re.search(r"  Time  Own time  Share  Attributes$", str(s).splitlines()[0])
    with torch.no_grad(), dt.capture(model) as plain:
        model(x)
    assert "time" not in plain.summary().rows()[0] and "Time" not in str(plain.summary())


def test_summary_of_a_training_step_splits_time_by_phase() -> None:
    torch.manual_seed(0)
    model, ids = Decoder(), torch.randint(0, 64, (2, 8))
    with dt.capture(model, timing=True) as g:
        model(ids).float().pow(2).mean().backward()
    rows = {r["label"]: r for r in g.summary().rows()}
    back = phase_graph(g, "backward")
    block = next(c for c in back.calls if c.path == "blocks.1")
    assert rows["blocks.1"]["backward_time"] == pytest.approx(block.time)
    assert rows["blocks.1"]["forward_time"] == pytest.approx(g.calls_of("blocks.1")[0].time)
    assert g.summary(phase="backward").total.time == pytest.approx(g.phase_times["backward"])
