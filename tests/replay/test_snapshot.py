"""Putting a model back after verify's runs, whatever grad mode the runs and the restore run in."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.replay._snapshot import ModuleState

MODES = {"grad": nullcontext, "no_grad": torch.no_grad, "inference": torch.inference_mode}


class Rescales(nn.Module):
    """A forward that rescales a parameter, a frozen parameter and a buffer in place under no_grad
    (Hugging Face's RWKV rescales its weights so in eval mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.frozen = nn.Parameter(torch.ones(3), requires_grad=False)
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.w.mul_(1.5)
            self.w[0].add_(1.0)  # a view of a leaf that requires grad
            self.frozen.mul_(3.0)
            self.scale.add_(1.0)
        return x * self.w + self.frozen * self.scale


@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_verify_passes_and_restores_a_forward_that_rescales_parameters_in_place(mode: str) -> None:
    m = Rescales()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(3)
    with MODES[mode]():
        report = dt.verify(m, x)
    assert report.ok, str(report)
    assert report.max_diff == 0.0
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert m.w.requires_grad and not m.frozen.requires_grad


def test_the_replay_of_a_no_grad_rescale_runs_with_grad_mode_on_and_keeps_autograd() -> None:
    captured, eager, replayed = Rescales(), Rescales(), Rescales()
    x = torch.randn(3, requires_grad=True)
    with dt.capture(captured) as g:
        captured(x)
    gm = g.to_fx(replayed)
    got = gm(x)  # the in-place writes run under no_grad, as in eager; the rest keeps autograd
    want = eager(x)
    assert torch.equal(got, want) and torch.equal(replayed.w, eager.w) and torch.equal(replayed.scale, eager.scale)
    got.sum().backward()
    want.sum().backward()
    assert torch.equal(replayed.w.grad, eager.w.grad)


class Holds(nn.Module):
    """Tensors of every kind, written in place by the test (not by a forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.ones(3))
        self.q = nn.Parameter(torch.ones(3), requires_grad=False)
        self.register_buffer("b", torch.ones(3))
        self.plain = torch.ones(3, requires_grad=True)  # a plain attribute, a leaf that requires grad
        with torch.inference_mode():
            self.inf = torch.ones(3)  # an inference tensor


def _write(m: Holds) -> None:
    with torch.no_grad():
        m.p.mul_(2)
        m.q.mul_(2)
        m.b.mul_(2)
        m.plain.mul_(2)
    with torch.inference_mode():
        m.inf.mul_(2)


@pytest.mark.parametrize("mode", list(MODES))
def test_restore_puts_back_every_kind_of_tensor_in_any_grad_mode(mode: str) -> None:
    m = Holds()
    state = ModuleState(m)
    _write(m)
    with MODES[mode]():
        state.restore()
    for name in ("p", "q", "b", "plain", "inf"):
        assert torch.equal(getattr(m, name), torch.ones(3)), name
    assert m.p.requires_grad and not m.q.requires_grad and m.plain.requires_grad and m.inf.is_inference()
    assert m.p.is_leaf and m.p.grad_fn is None and m.plain.grad_fn is None


def test_restore_puts_back_a_resized_buffer() -> None:
    m = Holds()
    state = ModuleState(m)
    with torch.no_grad():
        m.b.resize_(5).fill_(7.0)
    state.restore()
    assert m.b.shape == (3,) and torch.equal(m.b, torch.ones(3))
