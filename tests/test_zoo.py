"""The model zoo: every torchvision classification model and more, and the ``transformers`` and
``timm`` models of ``benchmarks/zoo_libraries.py``, on CPU and meta (slow; CI runs it).

Each model must give the module calls a plain global pre-hook sees, the op count of an empty
dispatch mode, a capture that passes ``lint()``, its keyword tensors as inputs, a replay that
reproduces its outputs, and a replay built from the record alone that reproduces the model's output
on a second input. ``benchmarks/coverage.py`` runs the same checks and publishes them in ``docs/coverage.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
pytest.importorskip("torchvision", reason="the model zoo is torchvision's models (no torchvision imports beside this torch)")
import zoo  # noqa: E402  (zoo_libraries imports it by this name)

# (model, device) pairs the model itself cannot run on, with the reason the plain forward gives
UNSUPPORTED = {
    ("fasterrcnn_mobilenet_v3_large_320_fpn", "meta"): "torch.nonzero()",  # data-dependent shapes
    ("hf bert (keywords)", "meta"): "Tensor.item() cannot be called on meta tensors",  # transformers' mask code
    ("hf gpt2 (gradient checkpointing)", "meta"): "Tensor.item() cannot be called on meta tensors",
    # torch's meta kernel of aten._grouped_mm takes only bf16/fp16
    ("hf mixtral", "meta"): "Expected mat_a to be BFloat16 or supported Float16 matrix",
    ("checkpoint (nn)", "meta"): "Cannot copy out of meta tensor",  # checkpoint's backward on meta
}
# Known failures (strict: a fixed one fails here, drop it then). The 20 issue-10 entries (keyword
# inputs, literal constants, the replay's signature, calls made during backward) are all fixed.
KNOWN: dict[tuple[str, str], str] = {}

SPECS = zoo.specs(libraries=True)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_zoo(spec: zoo.Spec, device: str, request: pytest.FixtureRequest) -> None:
    if spec.library in ("transformers", "timm"):
        pytest.importorskip(spec.library, reason="the zoo extra: scripts/setup.sh --test installs it")
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
    assert row.second == ("ok" if device == "cpu" and not spec.value_dependent else "-")
    assert row.ops > 0 and row.calls > 0


@pytest.mark.slow
def test_the_detection_model_replays_its_list_of_dicts() -> None:
    import dispatchtrace as dt
    from dispatchtrace.replay._locate import _constant_values

    spec = next(s for s in SPECS if s.name == "fasterrcnn_mobilenet_v3_large_320_fpn")
    torch.manual_seed(0)
    model = spec.build().eval()
    (images,), _ = spec.inputs()
    model(images)  # warms the caches MultiScaleRoIAlign fills once
    with dt.capture(model) as g:
        want = model(images)
    g.lint()
    gm = g.to_fx(model, constants=_constant_values(g, model, (images,), {}))
    got = gm(images)  # called as the model was
    assert type(got) is list and len(got) == len(want) == 1
    assert type(got[0]) is dict and list(got[0]) == ["boxes", "labels", "scores"]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_the_zoo_lists_every_torchvision_classification_model_and_the_extras() -> None:
    from vision import torchvision

    names = [s.name for s in SPECS]
    assert set(torchvision.models.list_models(module=torchvision.models)) <= set(names)
    for extra in ("fasterrcnn_mobilenet_v3_large_320_fpn", "deeplabv3_mobilenet_v3_large", "r3d_18", "raft_small",
                  "nn.LSTM", "nn.GRU", "nn.MultiheadAttention", "nn.MultiheadAttention (fast path)", "nn.Transformer",
                  "hf gpt2", "hf bert (keywords)", "hf t5", "hf llama", "hf mixtral", "hf whisper",
                  "timm efficientnet_b0", "timm convnext_atto", "timm vit_tiny_patch16_224", "timm swin (dynamic mask)",
                  "checkpoint (nn)", "hf gpt2 (gradient checkpointing)"):
        assert extra in names
    assert len(names) == len(set(names))
    assert not {n for n, _ in KNOWN} - set(names) and not {n for n, _ in UNSUPPORTED} - set(names)
    assert [s.name for s in zoo.specs()] == names[:len(zoo.specs())]  # the library models come after


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


class _Baked(nn.Module):
    """Bakes its input's values into a constant: replay reproduces the first input, not a second one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tensor(x.tolist()) * 2 + x


def test_the_second_input_catches_a_value_baked_into_the_capture() -> None:
    row = zoo.run(zoo.Spec("baked", _Baked, lambda: ((torch.randn(3),), {})), "cpu")
    assert row.calls_match and row.ops_match and row.replay == "ok"
    assert "values differ from the model's on it" in row.second, row.second
    assert row.problems[-1] == f"second input: {row.second}" and not row.ok
    assert zoo.run(zoo.Spec("baked", _Baked, lambda: ((torch.randn(3),), {}), value_dependent=True), "cpu").second == "-"


def test_docs_coverage_lists_every_zoo_model() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "coverage.md").read_text()
    missing = [s.name for s in SPECS if f"| {s.name} " not in text]
    assert not missing, f"docs/coverage.md is stale; run .venv/bin/python benchmarks/coverage.py (missing {missing})"
