"""Inputs made inside the capture block: the forward's arguments are the replay's inputs whatever made them."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN


class Embed(nn.Module):
    """A tokenizer-like integer input: token ids into an embedding, then a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10000, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(ids)) * scale


BUILDERS = {
    "randn": lambda: (torch.randn(1, 3, 32, 32),),
    "arange": lambda: (torch.arange(3 * 32 * 32, dtype=torch.float32).reshape(1, 3, 32, 32) / 3000,),
    "ones and arithmetic": lambda: ((torch.ones(1, 3, 32, 32) * 0.5 + torch.zeros(1, 3, 32, 32)).sin(),),
}


@pytest.mark.parametrize("made", list(BUILDERS))
def test_an_input_made_inside_the_block_is_read_from_the_replays_argument(made: str) -> None:
    torch.manual_seed(0)
    model = CoolCNN().eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(*BUILDERS[made]())
    assert g.inputs == [] and any(op.call is g.root for op in g.ops)  # the building ops stay in the capture
    assert any("only build" in note and "g.to_fx" in note for note in g.notes)
    gm = g.to_fx(model)
    fresh = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(gm(fresh), model(fresh), rtol=0, atol=0)
    built = {op.name for op in g.ops if op.call is g.root}
    replayed = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    assert built and not built & replayed  # aten.randn, aten.arange, aten.ones ... are not run by the replay


def test_a_resnet_on_an_input_made_inside_the_block_replays_on_a_fresh_input() -> None:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.randn(1, 3, 64, 64))
    fresh = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(g.to_fx(model)(fresh), model(fresh), rtol=0, atol=0)


def test_token_ids_from_python_data_and_a_scale_are_the_replays_inputs() -> None:
    torch.manual_seed(0)
    model = Embed()
    with dt.capture(model) as g:
        model(torch.tensor([[101, 7592, 2088, 102]]), torch.full((1,), 2.0))
    gm = g.to_fx(model)
    ids, scale = torch.randint(0, 10000, (1, 4)), torch.full((1,), 3.0)
    torch.testing.assert_close(gm(ids, scale), model(ids, scale), rtol=0, atol=0)
    assert gm.meta["dispatchtrace_inputs"] == ["ids", "scale"]


def test_a_tensor_the_block_reads_again_after_the_call_is_still_the_input() -> None:
    """``x`` is the argument and the loss reads it too: both read the replay's argument."""
    torch.manual_seed(0)
    model = nn.Linear(4, 4)
    with dt.capture(model) as g:
        x = torch.randn(2, 4)
        (model(x) - x).square().sum()
    fresh = torch.randn(2, 4)
    out = g.to_fx(model)(fresh)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(fresh), rtol=0, atol=0)


def test_a_root_value_read_apart_from_the_argument_is_replayed() -> None:
    """``base`` builds the argument and is read again after the call: it is no input construction."""
    model = nn.Linear(4, 4)
    with dt.capture(model) as g:
        base = torch.ones(2, 4)
        y = model(base * 2)
        base + 1
    found = dt.graph.input_construction(g)
    assert [op.target for op in found.ops] == ["aten.mul.Tensor"]
    fresh = torch.randn(2, 4)
    torch.testing.assert_close(g.to_fx(model)(fresh), model(fresh), rtol=0, atol=0)
    assert y.shape == (2, 4)


def test_inputs_passed_from_outside_leave_no_note() -> None:
    model, x = nn.Linear(4, 2), torch.randn(1, 4)
    with dt.capture(model) as g:
        model(x)
    assert g.notes == [] and not dt.graph.input_construction(g)
