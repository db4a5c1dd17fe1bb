"""Several ranks on one HTML page (render/ranks.py): a tab per rank, collectives aligned by position, mismatches marked.

Two ranks captured one after the other in this process, each alone on the fake backend (the collectives
dispatch and are recorded; no data moves); rank 1 reduces its second all-reduce with max.
"""

from __future__ import annotations

import html
import json
import re
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from models import needs_reduce_op

import dispatchtrace as dt
from dispatchtrace.cli import main
from dispatchtrace.render._html import HtmlOptions
from dispatchtrace.render._ranks import ranks_page, ranks_payload


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        dist.all_reduce(x)
        x = self.b(x)
        dist.all_reduce(x, op=dist.ReduceOp.MAX if dist.get_rank() == 1 else dist.ReduceOp.SUM)
        dist.broadcast(x, 0)
        return x


def _rank(rank: int, world: int, model: nn.Module) -> dt.Graph:
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        with warnings.catch_warnings(), torch.no_grad(), dt.capture(model) as g:
            warnings.simplefilter("ignore")
            model(torch.ones(2, 8))
    finally:
        dist.destroy_process_group()
    return g


@pytest.fixture(scope="module")
def ranks() -> dict[int, dt.Graph]:
    torch.manual_seed(0)
    model = Branchy()
    return {r: _rank(r, 2, model) for r in (0, 1)}


@needs_reduce_op
def test_payload_aligns_each_groups_collectives_by_position(ranks):
    p = ranks_payload(ranks)
    assert p["ranks"] == [0, 1]
    (group,) = p["groups"]
    assert group["group"] == "group 0 [0, 1]" and group["ranks"] == [0, 1]
    rows = group["rows"]
    assert [r["position"] for r in rows] == [0, 1, 2]
    assert [[c["text"] for c in r["cells"]] for r in rows] == [
        ["all_reduce sum f32[2, 8] -> f32[2, 8]"] * 2,
        ["all_reduce sum f32[2, 8] -> f32[2, 8]", "all_reduce max f32[2, 8] -> f32[2, 8]"],
        ["broadcast f32[2, 8] -> f32[2, 8]"] * 2]
    assert [(r["agree"], r["first"]) for r in rows] == [(True, False), (False, True), (True, False)]
    assert [c["serves"] for c in rows[0]["cells"]] == ["Branchy", "Branchy"]
    assert p["mismatch"].startswith("ranks disagree at collective 1 on group 0 [0, 1]")


def test_agreeing_ranks_have_no_highlighted_row(ranks):
    p = ranks_payload({0: ranks[0], 1: ranks[0]})
    assert p["mismatch"] is None and all(r["agree"] and not r["first"] for r in p["groups"][0]["rows"])


@needs_reduce_op
def test_page_holds_a_viewer_per_rank_and_the_aligned_table(ranks):
    text = ranks_page(ranks, HtmlOptions(title="branchy"))
    frames = re.findall(r'<iframe class="rank" data-rank="(\d)" title="rank \d" srcdoc="([^"]*)"', text)
    assert [r for r, _ in frames] == ["0", "1"]
    for _, doc in frames:  # each tab is that rank's whole viewer page, with its own payload
        inner = html.unescape(doc)
        data = json.loads(re.search(r'<script type="application/json" id="dt-data">(.*?)</script>', inner, re.S).group(1))
        assert [o[1] for o in data["o"]][:4] == ["ones", "t", "addmm", "allreduce_"]
    assert text.count('<tr class="first">') == 1 and text.count('<tr class="differ">') == 0
    assert '<pre id="verdict" class="bad">ranks disagree at collective 1' in text
    embedded = json.loads(re.search(r'<script type="application/json" id="dt-ranks">(.*?)</script>', text, re.S).group(1))
    assert embedded == json.loads(json.dumps(ranks_payload(ranks)))
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text


def test_cli_renders_rank_files_to_one_page(ranks, tmp_path, capsys):
    for r, g in ranks.items():
        g.save(dt.rank_path(tmp_path / "trace.json", rank=r))
    out = tmp_path / "ranks.html"
    assert main(["render", str(tmp_path / "trace.rank*.json"), "-o", str(out)]) == 0
    assert out.read_text().count('<iframe class="rank"') == 2
    dt.write_ranks(dt.load_ranks([tmp_path / "trace.rank0.json", tmp_path / "trace.rank1.json"]), str(tmp_path / "api.html"))
    assert (tmp_path / "api.html").read_text() == out.read_text()
    assert main(["render", str(tmp_path / "trace.rank*.json"), "-o", str(tmp_path / "x.svg")]) != 0
    assert "add -o ranks.html" in capsys.readouterr().err
