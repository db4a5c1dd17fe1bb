"""The deferred stats path (every device but the CPU: rows on the device, read once when the capture ends),
driven on the CPU so that CI runs its logic; and ``capture(stats=...)``'s options."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.graph import Graph, Stats
from dispatchtrace.models import CoolCNN
from dispatchtrace.recording import _stats_rows, fingerprint_of, stats_of


def _step(deferred: bool, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple[Graph, int]:
    """A CoolCNN training step with a NaN weight in its last layer and a GRU after it; how many stats the
    graph held inside the block, just before it ended."""
    monkeypatch.setattr(_stats_rows, "DEFER_ON_CPU", deferred)
    torch.manual_seed(0)
    model, gru = CoolCNN(), nn.GRU(4, 3)
    with torch.no_grad():
        model.output_layer.weight[0, 1] = math.nan
    opt = torch.optim.Adam(model.parameters(), lr=0.1, foreach=False)
    x = torch.randn(2, 3, 32, 32)
    with dt.capture(model, values="stats", **options) as g:  # type: ignore[arg-type]
        model(x).sum().backward()
        opt.step()
        gru(torch.randn(5, 1, 4), torch.zeros(1, 1, 3))
        torch.empty(3).fill_(2.0)
        torch.tensor([1, 0, 3]).sum()
        inside = len(g.stats)
    return g, inside


def _close(a: Stats, b: Stats) -> bool:
    if (a.numel, a.nan, a.posinf, a.neginf, a.zeros, a.fingerprint) != (b.numel, b.nan, b.posinf, b.neginf, b.zeros,
                                                                       b.fingerprint):
        return False
    if a.min is None or b.min is None:
        return a.min is b.min and a.mean is b.mean
    if (a.mean is None) != (b.mean is None):
        return False
    mean = a.mean is None or math.isclose(a.mean, b.mean, rel_tol=1e-5, abs_tol=1e-6)  # type: ignore[arg-type]
    return (a.min, a.max) == (b.min, b.max) and mean and math.isclose(a.norm, b.norm, rel_tol=1e-5)  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [{}, {"stats": ("mean", "zeros", "fingerprint")}])
def test_the_deferred_path_reads_the_stats_once_at_the_end_and_equals_the_eager_one(
        monkeypatch: pytest.MonkeyPatch, options: dict[str, object]) -> None:
    eager, during = _step(False, monkeypatch, **options)
    deferred, pending = _step(True, monkeypatch, **options)
    assert during > 0 and pending == 0  # deferred: nothing came to the host while the capture ran
    assert [op.target for op in eager.ops] == [op.target for op in deferred.ops]
    ids = {r.id for op in eager.ops for r in (*op.inputs, *op.outputs, *op.mutated)}
    assert set(eager.stats) == set(deferred.stats) and set(eager.stats) <= ids
    bad = [rid for rid in eager.stats if not _close(eager.stats[rid], deferred.stats[rid])]
    assert not bad, [(eager.stats[r], deferred.stats[r]) for r in bad[:3]]
    assert any(not s.finite for s in deferred.stats.values())
    assert all((s.mean is not None) == ("mean" in options.get("stats", ()) and s.min is not None)  # type: ignore[operator]
               for s in deferred.stats.values())
    found, again = eager.first_nonfinite(), deferred.first_nonfinite()
    assert found is not None and again is not None and (found.op.index, found.carried) == (again.op.index, again.carried)


def test_stats_options_mean_zeros_and_fingerprint() -> None:
    x = torch.tensor([[0.0, -0.0, 1.5], [2.0, 0.0, -1.0]])
    plain, full = stats_of(x), stats_of(x, mean=True, zeros=True, fingerprint=True)
    assert plain is not None and full is not None
    assert plain.mean is None and plain.zeros is None and plain.fingerprint is None
    assert full.zeros == 3 and full.mean == pytest.approx(2.5 / 6)
    assert full.fingerprint == fingerprint_of(x.t().contiguous().t())  # the value's, whatever its layout
    assert full.bitwise_equal(stats_of(x.clone(), fingerprint=True)) is True  # type: ignore[arg-type]
    y = x.clone()
    y[1, 0] = torch.nextafter(y[1, 0], torch.tensor(3.0))  # one unit in the last place: every stat but the hash agrees
    other = stats_of(y, zeros=True, fingerprint=True)
    assert other is not None and full.bitwise_equal(other) is False
    assert full.bitwise_equal(plain) is None  # not taken on one side: unknown
    swapped = stats_of(x.flip(1), fingerprint=True)
    assert swapped is not None and swapped.fingerprint != full.fingerprint
    for t in (torch.tensor([1, 2, 3]), torch.tensor([True, False]), torch.ones(3, dtype=torch.float64),
              torch.ones(3, dtype=torch.bfloat16)):
        assert fingerprint_of(t) == fingerprint_of(t.clone()) != fingerprint_of(t + 1)
    lin = nn.Linear(3, 2)
    with dt.capture(lin, values="stats", stats=["fingerprint"]) as g:
        lin(x)
    assert all(s.fingerprint is not None and s.zeros is None for s in g.stats.values())
    with dt.capture(lin, values="stats", stats="mean") as m:
        lin(x)
    assert all(s.mean is not None and s.zeros is None for s in m.stats.values())
    assert "mean" in str(m.stats[m.ops[-1].outputs[0].id]) and "mean" not in str(g.stats[g.ops[-1].outputs[0].id])
    with pytest.raises(ValueError, match="'ones' is not one of 'mean', 'zeros', 'fingerprint'"):
        dt.capture(lin, values="stats", stats=("ones",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='needs|adds to the statistics of values="stats"'):
        dt.capture(lin, stats=("zeros",))


def test_fingerprints_and_uncounted_zeros_save_and_load(tmp_path: object) -> None:
    lin = nn.Linear(3, 2)
    with dt.capture(lin, values="stats", stats=("fingerprint",)) as g:
        lin(torch.randn(4, 3))
    path = f"{tmp_path}/fp.json"
    g.save(path)
    back = dt.load(path)
    assert back.stats == g.stats and all(s.zeros is None and s.fingerprint is not None for s in back.stats.values())
