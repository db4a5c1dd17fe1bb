"""The issue's commands, as typed: ``hf:`` and ``timm:`` models by name from the command line (slow: default configs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dispatchtrace import cli

pytest.importorskip("transformers", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
pytest.importorskip("timm", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")


@pytest.mark.slow
def test_the_default_configs_trace_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["hf:gpt2", "--depth", "2"]) == 0
    out, err = capsys.readouterr()
    assert err == "dispatchtrace: hf:gpt2 is GPT2LMHeadModel: 124 M parameters, 498 MB of weights in float32\n"
    assert out.startswith("GPT2LMHeadModel  f32[1, 16, 50257]\n├── transformer (GPT2Model)  f32[1, 16, 768]\n")
    assert sum(f"transformer.h.{i} (GPT2Block)" in out for i in range(12)) == 12

    assert cli.main(["hf:llama", "--device", "meta", "-o", "llama.html"]) == 0
    out, err = capsys.readouterr()
    assert out == "wrote llama.html\n" and "6.7 G parameters" in err
    assert (tmp_path / "llama.html").read_text().lstrip().lower().startswith("<!doctype html")

    assert cli.main(["hf:t5", "--summary"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[1].split()[:2] == ["T5ForConditionalGeneration", "T5ForConditionalGeneration"]
    assert out.splitlines()[-1].startswith("Total")

    if shutil.which("dot") is not None:
        assert cli.main(["timm:convnext_tiny", "-o", "c.svg"]) == 0
        assert capsys.readouterr().out == "wrote c.svg\n"
        assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


def test_a_catalogue_model_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verify", "hf:gpt2", "--config", "n_layer=1", "n_embd=32", "n_head=2", "--seq", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hf:gpt2: ") and "replay ok" in out
