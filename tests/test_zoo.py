"""The model zoo: every torchvision classification model and more, on CPU and meta (slow; CI runs it).

Each model must give the module calls a plain global pre-hook sees, the op count of an empty
dispatch mode, and a replay that reproduces its outputs. ``benchmarks/coverage.py`` runs the same
checks and publishes them in ``docs/coverage.md``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

_path = Path(__file__).resolve().parent.parent / "benchmarks" / "zoo.py"
_spec = importlib.util.spec_from_file_location("dispatchtrace_zoo", _path)
assert _spec is not None and _spec.loader is not None
zoo = importlib.util.module_from_spec(_spec)
sys.modules["dispatchtrace_zoo"] = zoo
_spec.loader.exec_module(zoo)

# (model, device) pairs the model itself cannot run on, with the reason the plain forward gives
UNSUPPORTED = {
    ("fasterrcnn_mobilenet_v3_large_320_fpn", "meta"): "torch.nonzero()",  # data-dependent shapes
}
# known failures, each a capture limitation reported to the core's owner
KNOWN: dict[tuple[str, str], str] = {}

SPECS = zoo.specs()


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_zoo(spec: zoo.Spec, device: str, request: pytest.FixtureRequest) -> None:
    if (spec.name, device) in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[spec.name, device]))
    row = zoo.run(spec, device)
    expected = UNSUPPORTED.get((spec.name, device))
    if expected is not None:
        assert expected in row.unsupported, row.unsupported or "the model now runs here: drop it from UNSUPPORTED"
        return
    assert not row.unsupported, row.unsupported
    assert row.problems == []
    assert row.calls_match and row.ops_match
    assert row.lint == "ok"
    assert row.replay == "ok"
    assert row.ops > 0 and row.calls > 0


@pytest.mark.slow
def test_the_detection_model_replays_its_list_of_dicts() -> None:
    import dispatchtrace as dt
    from dispatchtrace.verify import _constant_values

    spec = next(s for s in SPECS if s.name == "fasterrcnn_mobilenet_v3_large_320_fpn")
    torch.manual_seed(0)
    model = spec.build().eval()
    (images,), _ = spec.inputs()
    model(images)  # warms the caches MultiScaleRoIAlign fills once
    with dt.capture(model) as g:
        want = model(images)
    g.lint()
    gm = g.to_fx(model, constants=_constant_values(g, model, (images,), {}))
    got = gm(*images)  # placeholders: the tensors of the positional arguments, flattened
    assert type(got) is list and len(got) == len(want) == 1
    assert type(got[0]) is dict and list(got[0]) == ["boxes", "labels", "scores"]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_the_zoo_lists_every_torchvision_classification_model_and_the_extras() -> None:
    import torchvision

    names = [s.name for s in SPECS]
    assert set(torchvision.models.list_models(module=torchvision.models)) <= set(names)
    for extra in ("fasterrcnn_mobilenet_v3_large_320_fpn", "deeplabv3_mobilenet_v3_large", "r3d_18", "raft_small",
                  "nn.LSTM", "nn.GRU", "nn.MultiheadAttention", "nn.MultiheadAttention (fast path)", "nn.Transformer"):
        assert extra in names
    assert len(names) == len(set(names))


class _Stateful(nn.Module):
    """Runs one more op on every call: independent runs disagree, and the checks must say so."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        for _ in range(self.calls):
            x = x.relu()
        return self.lin(x)


def test_the_checks_can_fail() -> None:
    row = zoo.run(zoo.Spec("stateful", _Stateful, lambda: ((torch.randn(1, 2),), {})), "cpu")
    assert row.calls_match and not row.ops_match and not row.ok
    assert row.problems == [f"{row.ops} ops captured, an empty dispatch mode counted {row.ops + 1}"]
    ok = zoo.run(zoo.Spec("linear", lambda: nn.Linear(2, 2), lambda: ((torch.randn(1, 2),), {})), "meta")
    assert ok.ok and ok.replay == "ok" and ok.lint == "ok" and ok.ops == 2


def test_docs_coverage_lists_every_zoo_model() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "coverage.md").read_text()
    missing = [s.name for s in SPECS if f"| {s.name} " not in text]
    assert not missing, f"docs/coverage.md is stale; run .venv/bin/python benchmarks/coverage.py (missing {missing})"
