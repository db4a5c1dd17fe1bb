"""Skips the doctests of the package that need what this torch lacks (``docs/compatibility.md``), with the reason.

The tests' own skips are in ``tests/models.py`` (``needs_node_hook``) and ``tests/vision.py``
(torchvision, which no PyPI release imports beside torch 2.13).
"""

from __future__ import annotations

import importlib.util

import pytest

from dispatchtrace._torch import NODE_CREATION_HOOK

_NEEDS_NODE_HOOK = {  # their examples print g.saved, g.memory() or backward ops under their forward calls
    "dispatchtrace.views._memory",
    "dispatchtrace.views._phases.phase_graph",
}
_NEEDS_TORCHVISION = {"dispatchtrace.cli._models.load_model", "dispatchtrace.models._catalogue"}


def _torchvision() -> bool:
    try:
        return importlib.util.find_spec("torchvision") is not None and bool(__import__("torchvision"))
    except Exception:  # noqa: BLE001 - built for another torch
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    vision = None
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        if not NODE_CREATION_HOOK and item.name in _NEEDS_NODE_HOOK:
            item.add_marker(pytest.mark.skip(reason="needs torch.autograd.graph.node_creation_hook (torch 2.14+)"))
        if item.name in _NEEDS_TORCHVISION:
            vision = _torchvision() if vision is None else vision
            if not vision:
                item.add_marker(pytest.mark.skip(reason="needs torchvision, which does not import beside this torch"))
