"""docs/tutorial.md's Python blocks run, in order, and print what the text blocks after them show."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest
from models import needs_node_hook

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"
ELIDED = re.compile(r"^[│├└─ ]*\.\.\.$")  # a line that stands for lines left out: "..." or "│   └── ..."


def blocks(doc: Path = TUTORIAL) -> list[tuple[str, str]]:
    """``(kind, text)`` of every fenced block of ``doc``, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)


def printed(code: str, namespace: dict[str, object], doc: Path) -> str:
    """What running one Python block of ``doc`` in ``namespace`` (shared by the doc's blocks) printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(doc), "exec"), namespace)  # noqa: S102 - our own docs
    return out.getvalue()


def shown(expected: str, printed: str) -> bool:
    """Whether ``printed`` is ``expected``, where each elided line of ``expected`` stands for any lines."""
    want = expected.splitlines()
    if not any(ELIDED.match(line) for line in want):
        return printed == expected
    got = iter(printed.splitlines())
    return all(ELIDED.match(line) or any(g == line for g in got) for line in want)


def value_comments(code: str) -> list[tuple[int, str]]:
    """``(line, comment)`` for each top-level expression whose value the block states in a comment:
    ``len(relus)  # 49 (...)`` or a ``# [...]`` line right below it."""
    lines = code.splitlines()
    out = []
    for stmt in ast.parse(code).body:
        if not isinstance(stmt, ast.Expr):
            continue
        tail = lines[stmt.end_lineno - 1][stmt.end_col_offset:].strip()
        below = lines[stmt.end_lineno].strip() if stmt.end_lineno < len(lines) else ""
        comment = tail if tail.startswith("#") else below if below.startswith("#") else ""
        if comment:
            out.append((stmt.lineno, comment[1:].strip()))
    return out


@needs_node_hook
def test_tutorial_python_blocks_run_and_print_what_it_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    found = blocks()
    checked_output = checked_values = 0
    for i, (kind, code) in enumerate(found):
        if kind != "python":
            continue
        out = printed(code, namespace, TUTORIAL)
        for line, comment in value_comments(code):
            expr = ast.get_source_segment(code, next(s for s in ast.parse(code).body if s.lineno == line))
            value = repr(eval(expr, namespace))  # noqa: S307 - our own tutorial
            assert comment.startswith(value), f"the tutorial says {expr} is {comment!r}; it is {value}"
            checked_values += 1
        after = found[i + 1] if i + 1 < len(found) else ("", "")
        if out and after[0] == "text":
            assert shown(after[1], out), f"block {i} printed:\n{out}\nthe tutorial shows:\n{after[1]}"
            checked_output += 1
    assert checked_output == 5 and checked_values == 5  # every printing block and every stated value was checked
    assert (tmp_path / "bottleneck.svg").read_text().lstrip().startswith("<?xml")


def test_elided_lines_stand_for_any_lines() -> None:
    assert shown("a\n...\nd\n", "a\nb\nc\nd\n") and not shown("a\n...\ne\n", "a\nb\nd\n")
    assert shown("a\n", "a\n") and not shown("a\n", "a\nb\n")
