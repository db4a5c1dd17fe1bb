"""The import rule of docs/architecture.md, checked on every module's source: data flows one way.

    helpers (_text, _structure, _torch, _collector, _version, errors)
      <- graph, hardware                    (neither imports the other)
        <- recording, views, serialize      (none of these three imports another)
          <- render, replay                 (nor does render import replay, or replay render)
            <- cli

``hardware`` (device and interconnect specifications) is a leaf beside ``graph``: it imports
neither, only the helpers. ``models`` (the bundled demo models) imports no layer. ``dispatchtrace/__init__.py`` and
``__main__.py`` are the facade and may import any layer. The one declared exception: ``Graph``'s
methods in ``graph/_graph.py`` are doors that import the view, renderer, serializer or replay they
call inside the method (or under ``TYPE_CHECKING`` for their annotations), never at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dispatchtrace"

HELPERS = {"_text", "_structure", "_torch", "_collector", "_version", "errors"}
RANK = {"graph": 1, "hardware": 1, "recording": 2, "views": 2, "serialize": 2, "render": 3, "replay": 3, "cli": 4}
FACADE = {"", "__main__"}
DOORS = "graph._graph"  # Graph's methods: function-local imports of the layers above, declared
PRIVATE_ROOT = HELPERS - {"errors"}


def layer_of(module: str) -> str:
    """The layer of a dotted module inside the package (``"graph"`` for ``graph.lint._lint``)."""
    first = module.split(".")[0]
    return first if first not in HELPERS else "helpers"


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules (inside the package, dotted, without ``dispatchtrace.``) an import names."""
    if node.level:
        base = module.split(".") if module else []
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = ".".join(base + ([node.module] if node.module else []))
    elif node.module == "dispatchtrace":
        target = ""
    elif node.module and node.module.startswith("dispatchtrace."):
        target = node.module[len("dispatchtrace."):]
    else:
        return []
    if target == "":  # from dispatchtrace import x: x is a layer, a helper or a name of the facade
        return [a.name if a.name in RANK or a.name in HELPERS or a.name == "models" else "" for a in node.names]
    return [target]


def _edges(source: str, module: str, is_package: bool) -> list[tuple[str, int, bool]]:
    """``(imported module, line, executed at import time)`` for every import of the package in ``source``."""
    tree = ast.parse(source)
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                found.extend((t, child.lineno, top) for t in _resolve(child, module, is_package))
            elif isinstance(child, ast.Import):
                found.extend((a.name[len("dispatchtrace."):], child.lineno, top) for a in child.names
                             if a.name.startswith("dispatchtrace."))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False)
            else:
                visit(child, top)

    visit(tree, True)
    return found


def violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import in ``sources`` (module -> (source, is_package)) that breaks the rule, as ``module:line -> target``."""
    bad = []
    for module, (source, is_package) in sorted(sources.items()):
        if module in FACADE:
            continue
        here = layer_of(module)
        for target, line, top in _edges(source, module, is_package):
            there = layer_of(target) if target else "facade"
            where = f"{module}:{line} -> {target or 'dispatchtrace'}"
            if here == "helpers":
                if target.split(".")[0] != module.split(".")[0]:
                    bad.append(f"{where} (a helper imports no other module of the package)")
            elif there == here or there == "helpers" or module == DOORS and not top and there in RANK:
                continue
            elif here == "models" or there == "facade" or there == "models" and here != "cli":
                bad.append(where)
            elif there != "models" and RANK[there] >= RANK[here]:
                bad.append(f"{where} ({there} is not below {here})")
    return bad


def _sources() -> dict[str, tuple[str, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        out[module] = (path.read_text(), is_package)
    return out


def test_every_import_follows_the_layers() -> None:
    assert violations(_sources()) == []


@pytest.mark.parametrize(
    ("module", "planted", "found"),
    [
        ("graph._records", "from ..views import tree\n", "graph._records:1 -> views (views is not below graph)"),
        ("graph.lint._refs", "from ...recording import capture\n", "graph.lint._refs:1 -> recording"),
        ("views._tree", "from ..serialize import dumps\n", "views._tree:1 -> serialize (serialize is not below views)"),
        ("recording._recorder", "def f():\n    from ..views import costs\n", "recording._recorder:2 -> views"),
        ("render._dot", "from ..replay import to_fx\n", "render._dot:1 -> replay (replay is not below render)"),
        ("replay._fx", "from ..cli import main\n", "replay._fx:1 -> cli"),
        ("_text", "from .graph import Graph\n", "_text:1 -> graph (a helper imports no other module"),
        ("graph._graph", "from ..views import tree\n", "graph._graph:1 -> views"),  # doors only inside methods
        ("models.coolcnn", "from ..graph import Graph\n", "models.coolcnn:1 -> graph"),
        ("hardware._link", "from ..graph import Graph\n", "hardware._link:1 -> graph (graph is not below hardware)"),
        ("serialize._load", "import dispatchtrace.render\n", "serialize._load:1 -> render"),
    ],
)
def test_a_planted_bad_import_is_found(module: str, planted: str, found: str) -> None:
    sources = _sources()
    source, is_package = sources[module]
    sources[module] = (planted + source, is_package)
    assert any(v.startswith(found) for v in violations(sources)), violations(sources)


def test_only_a_handful_of_private_helpers_sit_at_the_top() -> None:
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose == {"__init__", "__main__", "errors"} | PRIVATE_ROOT
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(RANK) | {"models"}
    for folder in set(RANK) - {"cli"}:  # implementation modules inside a layer are private
        public = [p.name for p in (PACKAGE / folder).rglob("*.py") if not p.name.startswith("_")]
        assert public == [], folder
