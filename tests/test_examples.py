"""The scripts in examples/ run as scripts and print the answers to the seed questions."""

import subprocess
import sys
from pathlib import Path

from vision import needs_torchvision

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(name: str, *args: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_coolcnn_prints_branches_and_writes_a_diagram(tmp_path):
    out = run("coolcnn.py", "cool.svg", cwd=tmp_path)
    lines = out.splitlines()
    assert lines[0] == "CoolCNN  f32[1, 10]"
    assert lines[1] == "├── 2 parallel branches"
    assert "│   │   ├── initial_conv (Conv2d)  f32[1, 16, 32, 32]" in lines
    assert "│       ├── parallel_conv (Conv2d)  f32[1, 16, 32, 32]" in lines
    assert "├── aten::add  f32[1, 16, 16, 16]  (joins 2 branches)" in lines
    assert "aten::add reads: max_pool#0, max_pool#1" in lines
    assert lines[-1] == "wrote cool.svg"
    assert "</svg>" in (tmp_path / "cool.svg").read_text()


@needs_torchvision
def test_resnet_calls_prints_all_49_relu_calls_in_order(tmp_path):
    lines = run("resnet_calls.py", cwd=tmp_path).splitlines()
    assert lines[0] == "named_modules() has 17 ReLU modules; the forward pass made 49 ReLU calls:"
    calls = [line.split()[1:3] for line in lines[1:50]]
    assert calls[0] == ["relu", "#0"]
    assert calls[1:4] == [["layer1.0.relu", "#0"], ["layer1.0.relu", "#1"], ["layer1.0.relu", "#2"]]
    assert calls[-1] == ["layer4.2.relu", "#2"]
    blocks = [f"layer{s}.{b}.relu" for s, n in zip((1, 2, 3, 4), (3, 4, 6, 3), strict=True) for b in range(n)]
    assert [c for c, _ in calls[1:]] == [p for p in blocks for _ in range(3)]
    assert lines[1].endswith("f32[1, 64, 112, 112]") and lines[4].endswith("f32[1, 256, 56, 56]")


def test_transformer_shows_residual_branches_per_layer(tmp_path):
    out = run("transformer.py", "t.svg", cwd=tmp_path)
    assert out.startswith("TinyLM  f32[1, 12, 100]\n├── embed (Embedding)  f32[1, 12, 64]\n")
    assert out.count("(joins 2 branches)") == 6  # two residual adds in each of 3 layers
    assert out.count("branch 2: skip (no ops on this path)") == 6
    assert "3 encoder layer calls" in out
    attn = out[out.index("\nencoder.layers.0.self_attn (MultiheadAttention)"):]
    assert "├── 3 parallel branches" in attn  # q, k, v
    assert "aten::_scaled_dot_product" in attn and "(joins 3 branches)" in attn
    assert (tmp_path / "t.svg").read_text().rstrip().endswith("</svg>")
