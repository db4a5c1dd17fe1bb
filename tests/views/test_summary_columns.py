"""Summary rows name calls fully, print unknown as ?, and carry input shapes, trainable/frozen and layer attributes."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.views._summary import LIVE_FIELDS


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        return x + self.attn(h, h, h, need_weights=False)[0]


class _GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict({"h": nn.ModuleList(_Block() for _ in range(4))})
        self.conv = nn.Conv1d(8, 8, 3, stride=2, padding=1, groups=2)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.transformer["h"]:
            x = self.act(block(x))
        return self.conv(x.transpose(1, 2))


def _capture() -> tuple[_GPT, dt.Graph]:
    model = _GPT().eval()
    for p in model.transformer["h"][0].parameters():
        p.requires_grad_(False)
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.randn(2, 5, 8))
    return model, g


def test_rows_name_the_call_fully() -> None:
    model, g = _capture()
    table = g.summary()
    labels = [r.label for r in table]
    assert "transformer.h.3.ln_1" in labels and "transformer.h.3.attn" in labels
    assert [label for label in labels if label.startswith("act")] == ["act#0", "act#1", "act#2", "act#3"]
    text = str(table)
    assert "\n    transformer.h.3.ln_1 " in text  # indented by depth (the block's call is depth 1), named in full
    assert "| transformer.h.3.ln_1 |" in table.markdown()


def test_inputs_trainable_frozen_and_attributes() -> None:
    model, g = _capture()
    rows = {r.label: r for r in g.summary()}
    conv = rows["conv"]
    assert conv.input == "f32[2, 8, 5]" and conv.output == "f32[2, 8, 3]"
    assert conv.attrs == {"kernel_size": (3,), "stride": (2,), "padding": (1,), "dilation": (1,), "groups": 2,
                          "in_channels": 8, "out_channels": 8}
    assert rows["transformer.h.1.attn"].attrs["num_heads"] == 2 and rows["transformer.h.1.ln_1"].attrs["eps"] == 1e-5
    assert rows["act#0"].attrs == {} and rows["_GPT"].attrs == {}
    frozen = sum(p.numel() for p in model.transformer["h"][0].parameters())
    assert (rows["transformer.h.0"].trainable, rows["transformer.h.0"].frozen) == (0, frozen)
    assert rows["_GPT"].frozen == frozen and rows["_GPT"].trainable + frozen == rows["_GPT"].params
    total = g.summary().total
    assert (total.trainable, total.frozen) == (rows["_GPT"].trainable, frozen)
    table = g.summary()
    line = next(line for line in str(table).splitlines() if line.strip().startswith("conv "))
    assert line.endswith("k=3 s=2 p=1 g=2") and "f32[2, 8, 5]" in line
    assert "heads=2" in table.markdown()
    assert "k=3 s=2 p=1 g=2" in g.to_dot(1).source  # the diagram's tooltip says it too


def test_unknown_is_a_question_mark_never_zero(tmp_path: Path) -> None:
    model, g = _capture()
    g.save(tmp_path / "t.json")
    loaded = dt.load(tmp_path / "t.json")
    row = loaded.summary().rows()[0]
    assert all(row[k] is None for k in LIVE_FIELDS)
    line = str(loaded.summary()).splitlines()[1].split()
    assert line[-1] == "?" and line.count("?") == 3  # trainable, frozen, attributes
    # a tensor whose size cannot be known (a symbolic shape) leaves the bytes unknown, not 0 B
    fresh = dt.load(tmp_path / "t.json")
    fresh.find_ops("aten::convolution*")[0].outputs[0].shape = ("s0", 8, 3)
    conv = next(r for r in fresh.summary() if r.label == "conv")
    assert conv.bytes is None and conv.output_bytes is None and fresh.summary().total.bytes is None
    cells = next(line for line in str(fresh.summary()).splitlines() if line.strip().startswith("conv ")).split()
    # trainable, frozen, FLOPs (`-`: no formula can read a symbolic shape), out bytes, written, attributes
    assert cells[-6:] == ["?", "?", "-", "?", "?", "?"] and "0 B" not in " ".join(cells)
