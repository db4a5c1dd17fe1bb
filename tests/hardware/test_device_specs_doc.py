"""docs/time.md's device-spec sections stay true: the Python block prints what it shows, the table of built-in
numbers is the specs' numbers, the hand-written JSON loads, the errors it quotes are the ones raised."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_tutorial import printed, shown

import dispatchtrace as dt
from dispatchtrace.hardware import BUILT_IN

DOC = Path(__file__).resolve().parents[2] / "docs" / "time.md"


def _sections() -> str:
    """The text from "## Device specifications" to the end of "## Calibrate" (the next "## " or the end)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Device specifications")
    calibrate = text.index("## Calibrate", start)
    after = text.find("\n## ", calibrate + 1)
    return text[start: after if after != -1 else len(text)]


def _blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", _sections(), flags=re.S)


def test_the_python_block_prints_what_the_doc_shows():
    found = _blocks()
    checked = 0
    for i, (kind, code) in enumerate(found):
        if kind == "python":
            assert found[i + 1][0] == "text"
            out = printed(code, {}, DOC)
            assert shown(found[i + 1][1], out), out
            checked += 1
    assert checked == 1


def test_the_table_is_the_built_in_numbers():
    rows = [line.split("|")[1:-1] for line in _sections().splitlines() if line.startswith("| `")]
    table = {r[0].strip(" `"): [c.strip() for c in r] for r in rows if r[0].strip(" `") in BUILT_IN}
    assert list(table) == list(BUILT_IN)
    for name, cells in table.items():
        spec = BUILT_IN[name]
        for cell, dtype in zip(cells[2:8], ("bfloat16", "tfloat32", "float32", "float64", "float8_e4m3fn", "int8"),
                               strict=True):
            rate = spec.peak(dtype)
            assert cell == "-" if rate is None else float(cell) * 1e12 == pytest.approx(rate), (name, dtype)
        assert float(cells[8].split()[0]) * 1e12 == pytest.approx(spec.memory_bandwidth)
        assert float(cells[9].split()[0]) * 2**30 == spec.memory
        assert f"{spec.intra_node.bandwidth / 1e9:g} GB/s" in cells[10]
        assert f"{spec.inter_node.bandwidth / 1e9:.3g} GB/s" in cells[11]


def test_the_hand_written_spec_loads_and_the_quoted_errors_are_real(tmp_path):
    found = _blocks()
    (example,) = [code for kind, code in found if kind == "json"]
    path = tmp_path / "spec.json"
    path.write_text(example)
    spec = dt.DeviceSpec.load(path)
    assert spec.name == "my-gpu" and spec.ranks_per_node == 8 and spec.intra_node.bandwidth == 300e9
    quoted = next(code for kind, code in found if kind == "text" and "spec.json:" in code).splitlines()
    good = BUILT_IN["h100-sxm"].to_dict()
    made = []
    for change in ({"memory_bandwidth": "3 TB/s"}, {"peak_flops": {"bf16": 1e12}},
                   {"compute_efficiency": {"matmul": [[1e9, 1.5]]}}):
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(dt.SpecError) as e:
            dt.DeviceSpec.load(path)
        made.append(str(e.value))
    path.write_text('{"name": "x", "peak_flops": {')
    with pytest.raises(dt.SpecError) as e:
        dt.DeviceSpec.load(path)
    made.append(str(e.value))
    with pytest.raises(dt.SpecError) as e:
        dt.DeviceSpec.named("h100-smx")
    made.append(str(e.value))
    assert [m.replace(str(path), "spec.json") for m in made] == quoted
