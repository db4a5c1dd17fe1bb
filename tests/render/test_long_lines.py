"""No line runs away: an unbind of 100 outputs is `100 × f32[3]` in op text, the tree, the diagram and the summary."""

from __future__ import annotations

import torch
import torch.nn as nn

import dispatchtrace as dt

TEXT_LIMIT = 200  # characters in a line of print(g), the tree, a collapsed graph, the summary
DOT_LIMIT = 400  # a DOT source line also carries its node's style and tooltip


class _Split(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.unbind(0)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.split = _Split()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = self.split(x)
        return torch.cat([r * 2 for r in rows])


def _longest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_unbind_of_100_rows_stays_short_everywhere() -> None:
    x = torch.randn(100, 3)
    with dt.capture() as g:
        parts = x.unbind(0)
        torch.stack(parts)  # one edge carrying the 100 pieces
    assert len(parts) == 100 and len(g.ops[0].outputs) == 100
    assert "-> (100 × f32[3])" in str(g) and _longest(str(g)) <= TEXT_LIMIT
    tree = str(g.tree())
    assert "aten::unbind  100 × f32[3]" in tree and _longest(tree) <= TEXT_LIMIT
    src = g.to_dot("ops").source
    assert 'label="100 × f32[3]"' in src and _longest(src) <= DOT_LIMIT
    assert _longest(str(g.collapse("ops"))) <= TEXT_LIMIT


def test_a_model_reading_100_pieces_stays_short() -> None:
    model = _Net()
    with dt.capture(model) as g:
        model(torch.randn(100, 3))
    cat = next(op for op in g.ops if op.short == "aten::cat")
    assert len(cat.inputs) == 100 and "… +" in str(cat)
    for text in (str(g), str(g.tree()), str(g.tree(ops=True)), str(g.collapse(1)), str(g.summary()), g.summary().markdown()):
        assert _longest(text) <= TEXT_LIMIT
    for depth in (1, "ops"):
        assert _longest(g.to_dot(depth, fold=False).source) <= DOT_LIMIT
    assert "split (_Split)  100 × f32[3]" in str(g.tree())
