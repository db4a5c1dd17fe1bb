"""The views on the model zoo (slow): no fold merges calls with different shapes, every join reads every branch.

The models are ``benchmarks/zoo.py``'s, the ``transformers`` and ``timm`` ones included, captured once each on CPU.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace.graph import Call, Op
from dispatchtrace.views import foldable_runs
from dispatchtrace.views._tree import TreeNode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
pytest.importorskip("torchvision", reason="the model zoo is torchvision's models (no torchvision imports beside this torch)")
import zoo  # noqa: E402  (zoo_libraries imports it by this name)

SPECS = zoo.specs(libraries=True)


def capture(spec: zoo.Spec) -> dt.Graph:
    model = zoo.build(spec)
    args, kwargs = spec.inputs()
    with torch.no_grad() if spec.no_grad else contextlib.nullcontext(), dt.capture(model) as g:
        zoo.step(spec, model, args, kwargs)
    return g


def structure(call: Call) -> list[tuple]:
    """Every call's type and every op's target with its tensors' shapes and dtypes, in the order they ran."""
    steps: list[tuple] = [(call.type, [r.shape_text for r in call.outputs])]
    for child in call.walk():
        if isinstance(child, Call):
            steps.append((child.type, [r.shape_text for r in child.outputs]))
        else:
            steps.append((child.target, [r.shape_text for r in child.inputs], [r.shape_text for r in child.outputs]))
    return steps


def ops_of(node: TreeNode) -> Iterator[Op]:
    for n in node.walk():
        if n.op is not None:
            yield n.op
        elif n.call is not None and not n.children:
            yield from n.call.all_ops()


def handed_on(node: TreeNode) -> set[int]:
    """Ids of the tensors a call without ops inside ``node`` passes on (an Identity shortcut)."""
    return {id(r) for n in node.walk() if n.call is not None and next(n.call.all_ops(), None) is None
            for r in n.call.outputs}


def reads(join: TreeNode) -> tuple[list, set[Op]]:
    """The activation tensors the join reads from outside itself, and the ops that wrote what it reads."""
    own = set(ops_of(join))
    if join.call is not None and not own:  # a call without ops: what it is handed
        return [r for r in join.call.inputs if r.kind in ("input", "activation")], set()
    refs = [r for o in own for r in o.inputs if r.kind in ("input", "activation") and r.producer not in own]
    writers = {p for o in own for p in o.producers if p not in own}
    return refs, writers


def check_joins(node: TreeNode, where: str) -> int:
    """Every ``joins N branches`` reads from each of the N branches before it; returns how many joins."""
    found = 0
    kids = node.children
    for i, par in enumerate(kids):
        if par.kind != "parallel":
            continue
        join = next((k for k in kids[i + 1:] if k.note.startswith("joins") or k.kind == "parallel"), None)
        if join is None or join.kind == "parallel":
            continue  # paths that run to the end of the call
        found += 1
        assert join.note == f"joins {len(par.children)} branches", (where, join.line)
        refs, writers = reads(join)
        inside: set[Op] = set()
        for branch in par.children:
            if branch.kind == "skip":
                continue
            ops_ = set(ops_of(branch))
            inside |= ops_
            passed = handed_on(branch)
            assert any(r.producer in ops_ or id(r) in passed for r in refs) or writers & ops_, (
                f"{where}: {join.line} does not read {branch.text}")
        if any(b.kind == "skip" for b in par.children):
            assert any(r.producer not in inside for r in refs), f"{where}: {join.line} does not read the skip path"
    for kid in kids:
        found += check_joins(kid, f"{where} > {kid.text}")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_views_say_true_things(spec: zoo.Spec) -> None:
    if spec.library in ("transformers", "timm"):
        pytest.importorskip(spec.library, reason="the zoo extra: scripts/setup.sh --test installs it")
    g = capture(spec)
    for run in foldable_runs(g, lambda c: True):
        first = structure(run.calls[0])
        for call in run.calls[1:]:
            assert structure(call) == first, f"{call.label} folded with {run.calls[0].label} but differs"
    for ops in (False, True):
        tree = g.tree(ops=ops)
        check_joins(tree.root, tree.root.text)
