"""One word, one thing (docs/architecture.md's words rule): the renames keep their old spelling one release, warning."""

from __future__ import annotations

import warnings

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace.graph import AUTO_DIAGRAM_NODES, AUTO_TREE_LINES, AUTO_VIEWER_BOXES
from dispatchtrace.render._dot import DiagramOptions


def test_a_refs_shape_text_and_its_deprecated_label() -> None:
    with dt.capture() as g:
        torch.ones(2, 3) + 1
    ref = g.ops[-1].outputs[0]
    assert ref.shape_text == "f32[2, 3]"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ref.label == ref.shape_text  # kept one release
    assert [w.category for w in caught] == [DeprecationWarning] and "shape_text" in str(caught[0].message)


def test_text_takes_stats_and_its_deprecated_values() -> None:
    with dt.capture(values="stats") as g:
        torch.ones(2) + 1
    assert "= [2, 2] norm 2.828" in g.text(stats=True) and g.text() == str(g)
    with pytest.warns(DeprecationWarning, match="stats="):
        assert g.text(values=True) == g.text(stats=True)


def test_the_auto_budgets_are_named_where_depth_lives() -> None:
    assert (AUTO_TREE_LINES, AUTO_DIAGRAM_NODES, AUTO_VIEWER_BOXES) == (150, 150, 30)
    assert DiagramOptions().max_nodes == AUTO_DIAGRAM_NODES
