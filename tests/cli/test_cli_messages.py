"""What a new user hits first: ``--version`` without torch, Ctrl-C while importing, a bad ``--config`` value,
a forward that fails on the shapes a config made, a mistyped timm name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from dispatchtrace import cli
from dispatchtrace.cli._options import forward_error

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def test_version_answers_without_importing_torch() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dispatchtrace", "--version"], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("dispatchtrace ")
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "dispatchtrace" in imported and not any(m.split(".")[0] == "torch" for m in imported)


def test_import_dispatchtrace_is_light_and_its_names_load_on_first_use() -> None:
    code = "import sys, dispatchtrace; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=300)
    assert done.stdout == "False\n", done.stderr
    import dispatchtrace as dt
    from dispatchtrace.recording import capture

    assert dt.capture is capture and dt.views.__name__ == "dispatchtrace.views" and "capture" in dir(dt)
    with pytest.raises(AttributeError, match="has no attribute 'captur'"):
        dt.captur  # noqa: B018


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps to know torch is loading")
def test_ctrl_c_while_importing_is_one_line_and_exit_130(tmp_path: Path) -> None:
    # SIGINT as a terminal delivers it, whatever the suite inherited (a suite started in the background by a
    # non-interactive shell inherits it ignored, and Python then installs no KeyboardInterrupt: the command ran to
    # its end, exit 0); the model's file, imported after torch, takes half a minute to load, so a signal noticed late
    # still finds the command importing, with or without torchvision
    (tmp_path / "slow.py").write_text("import time\n\nimport torch\n\ntime.sleep(30)\n\n\ndef Net():\n    return torch.nn.Linear(4, 2)\n")
    proc = subprocess.Popen([sys.executable, "-m", "dispatchtrace", f"{tmp_path / 'slow.py'}:Net", "--input", "1x4"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:  # until torch's libraries are being loaded
        try:
            if "/torch/" in maps.read_text():
                break
        except OSError:
            pass
        time.sleep(0.005)
    assert proc.poll() is None, "the command ended before torch was imported"
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert (proc.returncode, err) == (130, "dispatchtrace: interrupted\n")


def test_a_forward_error_of_a_catalogued_model_says_to_check_config() -> None:
    ids = torch.zeros(1, 16, dtype=torch.int64)
    text = str(forward_error("hf:bert", [ids], RuntimeError("index out of range in self")))
    assert "(check --config, which sets its shapes, then --input and --dtype;" in text
    assert "--config" not in str(forward_error("resnet18", [torch.zeros(1, 3)], RuntimeError("bad")))


@pytest.mark.slow  # transformers' import
def test_a_bad_config_value_is_the_whole_reason_in_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
    assert cli.main(["hf:falcon", "--config", "hidden_size=sixty"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hidden_size" in err and "expected int, got str (value: 'sixty')" in err
    assert "check config= (--config KEY=VALUE" in err


@pytest.mark.slow  # timm's import
def test_a_mistyped_timm_name_reads_o_as_0(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("timm", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
    assert cli.main(["timm:efficientnet_bo"]) == 2
    assert "did you mean timm:efficientnet_b0 or" in capsys.readouterr().err


@pytest.mark.slow
def test_a_config_whose_shapes_break_the_forward_says_to_check_config(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
    assert cli.main(["hf:bert", "--config", "type_vocab_size=0", "num_hidden_layers=1"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("dispatchtrace: error: the forward pass of hf:bert on input 1x16 raised")
    assert "check --config, which sets its shapes" in err


def test_every_name_of_the_facade_loads_from_where_its_type_checking_import_says() -> None:
    """A name added to ``dispatchtrace/__init__.py`` needs its line in ``_HOMES`` too (a merge can miss it)."""
    import ast

    import dispatchtrace as dt

    tree = ast.parse((ROOT / "dispatchtrace" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    declared = {a.asname or a.name: (n.module or a.name) for n in block.body if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert {k: v for k, v in declared.items() if k != "models"} == dt._HOMES
    assert set(dt.__all__) <= set(dt._HOMES) and all(getattr(dt, name) is not None for name in dt.__all__)
