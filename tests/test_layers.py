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

Beside the layers: no module imports another layer's private module (it imports what the layer's
``__init__.py`` offers); an import inside a function is kept only where it must be (a door of
``Graph``, an optional package); each door has one shape (import its layer, call one function,
return what it returns), and no code below ``cli/`` calls a door (it calls the layer's function).
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
    # ``from ..views import _diff`` names a private module (or name) as surely as ``from ..views._diff import x``
    private = [f"{target}.{a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return [target, *private]


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


# ---- no module imports another layer's private module ----------------------------------------------------------

#: imports of another layer's private module that files other helpers were editing still make

def _private(target: str) -> bool:
    """Whether ``target`` (a dotted module inside the package) is private to its layer: ``views._diff``."""
    return any(part.startswith("_") and not part.startswith("__") for part in target.split(".")[1:])


def private_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import, wherever it stands (also in a function or under ``TYPE_CHECKING``), of a private module of
    another layer, as ``module:line -> target``."""
    bad = []
    for module, (source, is_package) in sorted(sources.items()):
        here = "facade" if module in FACADE else layer_of(module)
        for target, line, _ in _edges(source, module, is_package):
            there = layer_of(target) if target else "facade"
            if there in (here, "helpers", "facade") or not _private(target):
                continue
            bad.append(f"{module}:{line} -> {target} (private to {there}: import it from {there})")
    return bad


def test_no_layer_imports_another_layers_private_module() -> None:
    assert private_imports(_sources()) == []


@pytest.mark.parametrize(
    ("module", "planted", "found"),
    [
        ("render._dot", "from ..views._tree import tree\n", "render._dot:1 -> views._tree (private to views"),
        ("graph._graph", "if TYPE_CHECKING:\n    from ..views._nonfinite import Kind\n", "graph._graph:2 -> views._nonfinite"),
        ("cli._trace", "def f():\n    from ..serialize._kept import values_path\n", "cli._trace:2 -> serialize._kept"),
        ("replay._verify", "from ..recording import _capture\n", "replay._verify:1 -> recording._capture"),
        ("", "from .render._formats import register\n", ":1 -> render._formats"),  # nor does the facade
    ],
)
def test_a_planted_private_import_is_found(module: str, planted: str, found: str) -> None:
    sources = _sources()
    source, is_package = sources[module]
    sources[module] = (planted + source, is_package)
    assert any(v.startswith(found) for v in private_imports(sources)), private_imports(sources)


# ---- imports inside functions: only where one must be --------------------------------------------------------

#: packages the package works without: imported where they are used, so that a missing one costs only that use
OPTIONAL = ("transformers", "timm", "torchvision", "safetensors",
            "torch.distributed")  # a torch built without distributed has no c10d names to import at module level

#: function-local imports kept on purpose, by (module, imported module), each with why
LOCAL_ALLOWED = {
    ("views._costs", "torch.utils.flop_counter"): "0.1 s to import (torch does not import it): paid when a cost is asked",
    # DeviceSpec's methods reach the modules that build specs from files, names, measurements and device names,
    # each of which makes DeviceSpec records: a cycle inside hardware/, cut in the method
    ("hardware._spec", "hardware._json"): "cycle: _json makes DeviceSpec",
    ("hardware._spec", "hardware._builtin"): "cycle: _builtin makes DeviceSpec",
    ("hardware._spec", "hardware._describe"): "cycle: _describe reads DeviceSpec",
    ("hardware._spec", "hardware._calibrate"): "cycle: _calibrate makes DeviceSpec",
    ("hardware._spec", "hardware._devices"): "cycle: _devices reads the built-in specs",
    ("hardware._json", "hardware._spec"): "cycle: _spec's load and save call _json",
    ("hardware._devices", "hardware._builtin"): "cycle: _builtin's specs, through _spec",
}


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """What an import names: dotted modules inside the package without ``dispatchtrace.``, others as spelled."""
    if isinstance(node, ast.Import):
        return [a.name.removeprefix("dispatchtrace.") for a in node.names]
    if node.level or (node.module or "").split(".")[0] == "dispatchtrace":
        targets = _resolve(node, module, is_package)  # the module, then any private name it imports
        return targets[1:] if node.module is None and len(targets) > 1 else targets[:1]  # from . import _text
    return [node.module or ""]


def local_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import inside a function that is no door of ``Graph``, of no optional package and not in
    ``LOCAL_ALLOWED``, as ``module:line -> imported``."""
    bad = []
    for module, (source, is_package) in sorted(sources.items()):
        tree = ast.parse(source)
        doors = set()
        if module == DOORS:
            graph = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Graph")
            doors = {id(n) for m in graph.body if isinstance(m, ast.FunctionDef) for n in ast.walk(m)}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in doors:
                    continue
                for name in _imported(node, module, is_package):
                    if name.split(".")[0] in OPTIONAL or name.startswith(OPTIONAL[-1]):
                        continue
                    if (module, name) not in LOCAL_ALLOWED:
                        bad.append(f"{module}:{node.lineno} -> {name}")
    return sorted(set(bad))


def test_imports_inside_functions_are_doors_or_optional_packages() -> None:
    assert local_imports(_sources()) == []


@pytest.mark.parametrize(
    ("module", "planted", "found"),
    [
        ("render._dot", "def f():\n    from ..views import tree\n", "render._dot:2 -> views"),
        ("views._tree", "def f():\n    import torch\n", "views._tree:2 -> torch"),
        ("graph._tensors", "class A:\n    def f(self):\n        from ._records import Op\n", "graph._tensors:3 -> graph._records"),
    ],
)
def test_a_planted_local_import_is_found(module: str, planted: str, found: str) -> None:
    sources = _sources()
    source, is_package = sources[module]
    sources[module] = (planted + source, is_package)
    assert found in local_imports(sources)


def test_optional_packages_may_be_imported_in_a_function() -> None:
    sources = _sources()
    source, is_package = sources["models._timm"]
    assert local_imports({"models._timm": (source, is_package)}) == []
    assert "import timm" in source  # (the exemption is used)


# ---- Graph's doors ---------------------------------------------------------------------------------------------

def doors(source: str) -> dict[str, list[str]]:
    """``Graph``'s methods that import a layer, each with what is wrong with its shape (``[]`` for a good door):
    a docstring, one ``from ..layer import f``, ``return f(self, ...)`` with no other call."""
    graph = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Graph")
    found: dict[str, list[str]] = {}
    for m in graph.body:
        if not isinstance(m, ast.FunctionDef) or not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(m)):
            continue
        body = m.body[1:] if m.body and isinstance(m.body[0], ast.Expr) and isinstance(m.body[0].value, ast.Constant) else m.body
        wrong = []
        if len(body) != 2 or not isinstance(body[0], ast.ImportFrom) or not isinstance(body[1], ast.Return):
            wrong.append("not: import, return")
        else:
            imp, ret = body
            names = {a.asname or a.name for a in imp.names}
            if imp.level != 2 or (imp.module or "").split(".")[0] not in RANK or len(names) != 1:
                wrong.append(f"imports {ast.unparse(imp)!r}, not one name of a layer above graph")
            call = ret.value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names):
                wrong.append("does not return the imported function's result")
            elif not (call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
                wrong.append("does not pass self first")
            elif sum(isinstance(n, ast.Call) for n in ast.walk(call)) != 1:
                wrong.append("calls more than one function")
        found[m.name] = wrong
    return found


DOOR_NAMES = {"collapse", "tree", "to_dot", "render", "_repr_mimebundle_", "to_fx", "costs", "memory", "collectives",
              "summary", "find_ops", "find_calls", "calls_of", "ops_between", "save", "first_nonfinite",
              "estimate"}


def test_each_door_imports_its_layer_calls_one_function_and_returns_its_result() -> None:
    found = doors((PACKAGE / "graph" / "_graph.py").read_text())
    assert set(found) == DOOR_NAMES
    assert {name: wrong for name, wrong in found.items() if wrong} == {}


@pytest.mark.parametrize(
    ("old", "new", "wrong"),
    [
        ("        return tree(self, depth,", "        t = 1\n        return tree(self, depth,", "not: import, return"),
        ("return costs(self)", "return costs(self.root)", "does not pass self first"),
        ("return memory(self)", "return memory(len(self))", "does not pass self first"),
        ("return summary(self, depth, phase=phase)", "return summary(self, depth, phase=str(phase))", "more than one"),
        ("from ..views import memory", "from ..views import memory, tree", "not one name"),
    ],
)
def test_a_door_of_another_shape_is_found(old: str, new: str, wrong: str) -> None:
    source = (PACKAGE / "graph" / "_graph.py").read_text()
    assert old in source
    found = doors(source.replace(old, new, 1))
    assert any(wrong in w for ws in found.values() for w in ws), found


def door_calls(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every ``x.door(...)`` in code below ``cli/`` (the facade, cli and the doors themselves aside): code of the
    package calls the layer's function, never a door, so that a door stays a door for the user."""
    bad = []
    for module, (source, _) in sorted(sources.items()):
        if module in FACADE or module == DOORS or layer_of(module) == "cli":
            continue
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DOOR_NAMES):
                bad.append(f"{module}:{node.lineno} calls .{node.func.attr}()")
    return bad


def test_no_code_below_cli_calls_a_door() -> None:
    assert door_calls(_sources()) == []


def test_a_planted_door_call_is_found() -> None:
    sources = _sources()
    source, is_package = sources["views._tree"]
    sources["views._tree"] = ("def f(g):\n    return g.costs()\n" + source, is_package)
    assert "views._tree:2 calls .costs()" in door_calls(sources)
