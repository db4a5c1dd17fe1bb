"""The viewer's script files without a browser: each declares what it reads and defines, and reads only what
an earlier file in the page's load order defined; one keydown handler; the page's search rule is Python's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources

import pytest

import dispatchtrace as dt
from dispatchtrace.render._html import SCRIPTS, WORKER, HtmlOptions, page
from dispatchtrace.views import matches

#: the page's load order: the vendored dagre, the worker's group.js, then the page's own scripts
ORDER = (WORKER, *SCRIPTS)


def source(name: str) -> str:
    return resources.files("dispatchtrace.render").joinpath("viewer", name).read_text(encoding="utf-8")


def header(text: str, field: str) -> set[str]:
    m = re.search(rf"^// {field}: (.*)$", text, re.M)
    assert m is not None, f"no '// {field}:' line in the file's header"
    return set() if m.group(1) == "(nothing)" else set(m.group(1).split())


def defined(text: str) -> set[str]:
    """The names a file assigns on the namespace (``DT.Name = ...``)."""
    return {f"DT.{n}" for n in re.findall(r"\bDT\.(\w+)\s*=(?![=>])", text)}


def read(text: str) -> set[str]:
    """The names a file uses from the namespace (and the vendored ``dagre``) that it does not assign itself."""
    code = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    used = {f"DT.{n}" for n in re.findall(r"\bDT\.(\w+)", code)} | ({"dagre"} if re.search(r"\bdagre\.", code) else set())
    return used - defined(text)


def test_the_load_order_is_the_pages() -> None:
    import torch

    lin = torch.nn.Linear(2, 2)
    with dt.capture(lin) as g:
        lin(torch.ones(1, 2))
    text = page(g, HtmlOptions())
    at = [text.index("@dagrejs/dagre"), *(text.index(f"// ---- {name}\n") for name in ORDER)]
    assert at == sorted(at)


@pytest.mark.parametrize("k", range(len(ORDER)), ids=ORDER)
def test_each_file_declares_what_it_reads_and_defines(k: int) -> None:
    name = ORDER[k]
    text = source(name)
    assert header(text, "defines") == defined(text), f"{name}: its '// defines:' line is not what it assigns"
    assert header(text, "reads") == read(text), f"{name}: its '// reads:' line is not what it uses"
    earlier = {"dagre"}.union(*(defined(source(n)) for n in ORDER[:k]))
    missing = read(text) - earlier
    assert not missing, f"{name} reads {sorted(missing)}, which no file before it in the load order defines"


def test_no_file_extends_another_files_class() -> None:
    """A class is defined in one file: ``DT.View.prototype.x = ...`` only where ``DT.View`` is defined."""
    for name in ORDER:
        text = source(name)
        mine = {n.removeprefix("DT.") for n in defined(text)}
        for cls in re.findall(r"^DT\.(\w+)\.prototype\.\w+\s*=", text, re.M):
            assert cls in mine, f"{name} adds methods to DT.{cls}, defined in another file"


def test_one_keydown_handler() -> None:
    found = [name for name in ORDER for _ in re.finditer(r"addEventListener\(\"keydown\"", source(name))]
    assert found == ["main.js"]


CASES = [
    ("layer1.0.relu#2", q) for q in ("relu", "relu#2", "relu#?", "*relu#[0-2]", "*relu#[!2]", "layer1.*", "layer1*",
                                    "Layer1", "layer1.0.relu#2", "[", "*[", "layer1.0.relu#[2", "lay?r1*")
] + [
    ("aten.add_.Tensor", q) for q in ("aten.add_", "aten.add*", "aten.ADD*", "add", "*.Tensor", "aten.add_.Tensor", "aten.[ab]dd_*")
] + [("convolution_30", "convolution_3"), ("convolution_3", "convolution_3"), ("Bottleneck", "bottleneck"),
     ("Bottleneck", "*neck"), ("a.b", "a?b"), ("a\\b", "a\\b"), ("a\\b", "a[\\]b"), ("x(y)+z", "x(y)+*"), ("a]b", "a]*")]


def test_the_pages_search_rule_is_pythons() -> None:
    """DT.matches, run by node, against views.matches on the same texts and queries (skipped without node)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the browser test compares the page's search with views.search")
    script = ("var window = {};\n" + source("panel.js") +
              "\nvar cases = JSON.parse(process.argv[1]);"
              "\nconsole.log(JSON.stringify(cases.map(function (c) { return DT.matches(c[0], c[1]); })));\n")
    out = subprocess.run([node, "-e", script, json.dumps(CASES)], capture_output=True, text=True, check=True).stdout
    page_says = json.loads(out)
    python_says = [matches(text, q) for text, q in CASES]
    assert page_says == python_says, [(c, a, b) for c, a, b in zip(CASES, page_says, python_says, strict=True) if a != b]
    assert sum(python_says) not in (0, len(CASES))  # both answers occur


#: the payload's tables of rows (render/_html.py's CALL_FIELDS, OP_FIELDS; render/_html_stats.py's STATS_TABLES)
ROW_TABLES = ("c", "o", "st", "cst")


def test_no_script_reads_a_payload_row_by_position() -> None:
    """Only rows.js reads a row's items, by the positions the payload's ``fields`` name; every other script meets the
    payload's rows decoded (``rows.all(table, p.c)``), so no script indexes a payload row by number."""
    for name in ORDER:
        code = "\n".join(line for line in source(name).splitlines() if not line.lstrip().startswith("//"))
        for m in re.finditer(rf"\bp\.({'|'.join(ROW_TABLES)})\b", code):
            line = code[code.rfind("\n", 0, m.start()) + 1:code.find("\n", m.end())]
            assert name != "rows.js" and re.search(r"\.all\(\"\w+\", (list|p\.\w+)\)", line), \
                f"{name} reads the payload's rows {m.group(0)} without rows.js: {line.strip()}"
        if name == "rows.js":
            continue
        old = re.findall(r"\b(?:r|row|s)\[\d+\]", code)  # the names the scripts read rows by, before the payload named fields
        assert not old, f"{name} indexes a row by number: {old}"
    assert "rows.js" in SCRIPTS and re.search(r"r\[k\]", source("rows.js"))  # its one read: by the field's position
