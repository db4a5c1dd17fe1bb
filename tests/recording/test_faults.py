"""What goes wrong in real use: errors mid-forward, interrupts, threads, other dispatch modes, hooks, recursion."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn as nn
from torch.nn.modules import module as nn_module
from torch.utils.flop_counter import FlopCounterMode

import dispatchtrace as dt


def _global_hooks() -> tuple[list[int], list[int], list[int]]:
    return (list(nn_module._global_forward_pre_hooks), list(nn_module._global_forward_hooks),
            sorted(nn_module._global_forward_hooks_always_called))


class Boom(nn.Module):
    def __init__(self, exc: type[BaseException]) -> None:
        super().__init__()
        self.exc = exc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise self.exc("boom")


def _net(exc: type[BaseException] | None = None) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(4, 4), nn.ReLU()]
    if exc is not None:
        layers.append(Boom(exc))
    return nn.Sequential(*layers, nn.Linear(4, 2))


def _targets(g: dt.Graph) -> list[str]:
    return [op.target for op in g.ops]


def _computing(g: dt.Graph) -> list[dt.Op]:
    """Ops less ``prim.device``: FakeTensor answers ``.device`` through a dispatched prim op."""
    return [op for op in g.ops if not op.target.startswith("prim.")]


@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
def test_a_forward_that_raises_half_way_leaves_a_partial_graph_and_no_hooks(exc: type[BaseException]) -> None:
    before = _global_hooks()
    model, x = _net(exc), torch.randn(1, 4)
    with pytest.raises(exc, match="boom"), torch.no_grad():
        with dt.capture(model) as g:
            model(x)
    assert _global_hooks() == before
    assert isinstance(g.error, exc) and g.complete
    assert _targets(g) == ["aten.t.default", "aten.addmm.default", "aten.relu.default"]
    assert [c.path for c in g.calls] == ["", "0", "1", "2"]  # the call that raised is there, the last never ran
    # the next capture works and sees the whole forward
    clean = _net()
    with dt.capture(clean) as g2, torch.no_grad():
        clean(x)
    assert g2.error is None and [c.path for c in g2.calls] == ["", "0", "1", "2"]
    assert _targets(g2) == ["aten.t.default", "aten.addmm.default", "aten.relu.default", "aten.t.default", "aten.addmm.default"]
    assert _global_hooks() == before


def test_an_exception_outside_any_module_also_cleans_up() -> None:
    before = _global_hooks()
    model, x = _net(), torch.randn(1, 4)
    with pytest.raises(RuntimeError, match="after"), torch.no_grad():
        with dt.capture(model) as g:
            model(x)
            raise RuntimeError("after the forward")
    assert _global_hooks() == before
    assert len(g.ops) == 5 and isinstance(g.error, RuntimeError)


def test_a_capture_in_a_thread_sees_none_of_another_threads_modules() -> None:
    model, x = _net(), torch.randn(1, 4)
    with dt.capture(model) as alone:
        model(x)
    stop = threading.Event()
    other = nn.Sequential(nn.Tanh(), nn.Sigmoid())

    def busy() -> None:
        while not stop.is_set():
            other(torch.randn(8, 8))

    worker = threading.Thread(target=busy)
    worker.start()
    graphs: list[dt.Graph] = []

    def capture_in_thread() -> None:
        for _ in range(20):
            with dt.capture(model) as g:
                model(x)
            graphs.append(g)

    try:
        t = threading.Thread(target=capture_in_thread)
        t.start()
        t.join()
    finally:
        stop.set()
        worker.join()
    assert len(graphs) == 20
    for g in graphs:
        assert [c.type for c in g.calls] == [c.type for c in alone.calls]
        assert _targets(g) == _targets(alone)


def test_a_module_running_in_another_thread_does_not_leak_into_the_main_threads_capture() -> None:
    model, x = _net(), torch.randn(1, 4)
    started, release = threading.Event(), threading.Event()

    class Blocking(nn.Module):
        def forward(self, y: torch.Tensor) -> torch.Tensor:
            started.set()
            release.wait(5)
            return y.tanh()

    blocker = Blocking()
    worker = threading.Thread(target=lambda: blocker(torch.ones(2)))
    worker.start()
    started.wait(5)
    with dt.capture(model) as g:  # the worker is inside Blocking.forward: its exit must not touch our stack
        model(x)
        release.set()
        worker.join()
        model(x)
    assert [c.path for c in g.calls] == ["", "0", "1", "2"] * 2
    assert "aten.tanh.default" not in _targets(g)


def test_a_capture_inside_flop_counter_mode_and_the_other_way_round() -> None:
    model, x = _net(), torch.randn(3, 4)
    with FlopCounterMode(display=False) as plain:
        model(x)
    with dt.capture(model) as alone:
        model(x)
    with FlopCounterMode(display=False) as outer:
        with dt.capture(model) as inner_g:
            model(x)
    with dt.capture(model) as outer_g:
        with FlopCounterMode(display=False) as inner:
            model(x)
    assert plain.get_total_flops() == outer.get_total_flops() == inner.get_total_flops() == 2 * 3 * (4 * 4 + 4 * 2)
    for g in (inner_g, outer_g):
        assert _targets(g) == _targets(alone)
        assert [c.path for c in g.calls] == [c.path for c in alone.calls]
    torch.testing.assert_close(outer_g.to_fx(model)(x), model(x))


def test_a_capture_inside_fake_tensor_mode_records_real_shapes() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    model, x = _net(), torch.randn(3, 4)
    with dt.capture(model) as real:
        model(x)
    with FakeTensorMode(allow_non_fake_inputs=True) as fake_mode:
        fx_ = fake_mode.from_tensor(x)
        with dt.capture(model) as g:
            out = model(fx_)
    assert type(out).__name__ == "FakeTensor" and out.shape == (3, 2)
    assert {op.target for op in g.ops} - set(_targets(real)) == {"prim.device.default"}
    assert [op.target for op in _computing(g)] == _targets(real)
    assert [op.outputs[0].shape for op in _computing(g)] == [op.outputs[0].shape for op in real.ops]
    assert [c.path for c in g.calls] == [c.path for c in real.calls]


def test_fake_tensor_mode_inside_a_capture() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    model, x = _net(), torch.randn(3, 4)
    with dt.capture(model) as real:
        model(x)
    with dt.capture(model) as g:
        with FakeTensorMode(allow_non_fake_inputs=True) as fake_mode:
            out = model(fake_mode.from_tensor(x))
    assert out.shape == (3, 2)
    assert [c.path for c in g.calls] == [c.path for c in real.calls]
    # the inner fake mode runs each op, then hands it on to the capture (plus its prim.device queries)
    assert [op.target for op in _computing(g)] == _targets(real)
    assert [op.outputs[0].shape for op in _computing(g)] == [op.outputs[0].shape for op in real.ops]


class Doubled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.inner(x))


def test_user_hooks_that_change_a_childs_inputs_and_outputs_replay() -> None:
    model, x = Doubled(), torch.randn(2, 4)
    model.inner.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model.inner.register_forward_hook(lambda m, args, out: out + 1)
    with dt.capture(model) as g:
        y = model(x)
    by_target = {op.target: op for op in g.ops}
    assert by_target["aten.mul.Tensor"].call.path == "inner"  # pre-hooks run inside the call
    assert by_target["aten.add.Tensor"].call.path == ""  # forward hooks run after it closed
    assert [c.path for c in g.calls] == ["", "inner", "out"]
    assert dt.verify(model, x)
    torch.testing.assert_close(g.to_fx(model)(x), y)


def test_user_hooks_on_the_model_itself_replay() -> None:
    model, x = Doubled(), torch.randn(2, 4)
    model.register_forward_hook(lambda m, args, out: out * 3)
    report = dt.verify(model, x)
    assert report, str(report)


def test_recursive_module_calls_nest_and_count() -> None:
    class Recursive(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor, depth: int = 3) -> torch.Tensor:
            return x if depth == 0 else self(self.lin(x).relu(), depth - 1)

    model, x = Recursive(), torch.randn(1, 3)
    with dt.capture(model) as g:
        y = model(x)
    assert [(c.path, c.index, c.depth) for c in g.calls] == [
        ("", 0, 0), ("lin", 0, 1), ("", 1, 1), ("lin", 1, 2), ("", 2, 2), ("lin", 2, 3), ("", 3, 3)]
    assert [c.label for c in g.calls][:3] == ["#0", "lin#0", "#1"] or g.calls[0].repeat == 4
    assert all(op.call.path == "" for op in g.ops if op.target == "aten.relu.default")
    torch.testing.assert_close(g.to_fx(model)(x), y)


def test_a_generator_forward_runs_its_body_after_the_call_closed() -> None:
    class Steps(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor):  # noqa: ANN201 - a generator
            for _ in range(3):
                x = self.lin(x)
                yield x

    model, x = Steps(), torch.randn(1, 3)
    with dt.capture(model) as g:
        ys = list(model(x))
    assert [(c.path, c.depth) for c in g.calls] == [("", 0), ("lin", 0), ("lin", 0), ("lin", 0)]
    assert g.calls[0].ops == [] and len(g.ops) == 6
    outs = g.to_fx(model)(x)  # four top-level calls: the flat tuple of their outputs
    assert isinstance(outs, tuple) and len(outs) == 3
    for got, want in zip(outs, ys, strict=True):
        torch.testing.assert_close(got, want)


def test_a_torch_generator_argument_replays_from_the_same_seed() -> None:
    class Noise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gen = torch.Generator().manual_seed(7)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.randn(x.shape, generator=self.gen)

    model, x = Noise(), torch.zeros(4)
    with dt.capture(model) as g:
        y = model(x)
    (op,) = [op for op in g.ops if op.target.startswith("aten.randn")]
    assert isinstance(op.kwargs["generator"], torch.Generator) and op.kwargs["generator"].initial_seed() == 7
    model.gen.manual_seed(7)
    torch.testing.assert_close(g.to_fx(model)(x), y)
