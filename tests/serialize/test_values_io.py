"""Values in saved files: stats rows in the JSON (format 5), kept tensors beside it as safetensors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN
from dispatchtrace.serialize import dumps, loads


def _capture(**options: object) -> dt.Graph:
    torch.manual_seed(0)
    model = CoolCNN()
    x = torch.randn(1, 3, 32, 32)
    x[0, 0, 0, 0] = float("nan")
    with dt.capture(model, **options) as g:  # type: ignore[arg-type]
        model(x)
    return g


def test_stats_are_saved_and_loaded_back_equal(tmp_path: Path) -> None:
    g = _capture(values="stats")
    g.save(tmp_path / "t.json")
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["version"] == 5 and data["values"] == "stats" and len(data["stats"]) == len(g.stats)
    h = dt.load(tmp_path / "t.json")
    assert h.values == "stats" and h.stats == g.stats and h.text(stats=True) == g.text(stats=True)
    assert str(h.first_nonfinite()) == str(g.first_nonfinite())


def test_a_capture_without_values_is_written_as_format_4() -> None:
    data = json.loads(dumps(_capture()))
    assert data["version"] == 4 and "stats" not in data and "values" not in data
    assert loads(dumps(_capture())).values == "none"


def test_kept_values_go_beside_the_json_and_come_back(tmp_path: Path) -> None:
    pytest.importorskip("safetensors", reason="kept values are written with safetensors (the values extra)")
    g = _capture(keep="aten.relu*")
    g.save(tmp_path / "t.json")
    assert sorted(os.listdir(tmp_path)) == ["t.json", "t.values.safetensors"]
    assert b"torch" not in (tmp_path / "t.values.safetensors").read_bytes()[:8]  # a safetensors header, no pickle
    h = dt.load(tmp_path / "t.json")
    for op in g.find_ops("aten.relu*"):
        torch.testing.assert_close(h.value(h.ops[op.index]), g.value(op), rtol=0, atol=0, equal_nan=True)
    text = loads((tmp_path / "t.json").read_text())  # no folder: the values stay where they are, said in a note
    assert not text.kept and any("t.values.safetensors" in n for n in text.notes)
    (tmp_path / "t.values.safetensors").unlink()
    with pytest.raises(dt.FormatError, match="not beside it"):
        dt.load(tmp_path / "t.json")


def test_a_damaged_stats_row_is_a_format_error(tmp_path: Path) -> None:
    data = json.loads(dumps(_capture(values="stats")))
    data["stats"][0] = data["stats"][0][:3]
    with pytest.raises(dt.FormatError, match="stats row 0: the row is"):
        loads(json.dumps(data))


def test_without_safetensors_saving_kept_values_says_what_to_install(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    g = _capture(keep="aten.relu*")
    monkeypatch.setitem(__import__("sys").modules, "safetensors", None)  # as if it were not installed
    monkeypatch.setitem(__import__("sys").modules, "safetensors.torch", None)
    with pytest.raises(ImportError, match=r"pip install safetensors \(or pip install 'dispatchtrace\[values\]'\)"):
        g.save(tmp_path / "t.json")
    _capture(values="stats").save(tmp_path / "s.json")  # stats alone need nothing more
    assert dt.load(tmp_path / "s.json").stats
