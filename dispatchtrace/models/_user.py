"""The user's own models: ``package.module:factory`` and ``path/to/file.py:Name``, built with no arguments."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch.nn as nn

from .._text import one_line
from ..errors import ModelError

FORMS = "package.module:factory, or path/to/file.py:Name"


def is_drive(spec: str) -> bool:
    """``C:\\\\nets.py``: a Windows drive, not a ``where:name`` colon."""
    return len(spec) > 2 and spec[1] == ":" and spec[0].isalpha() and spec[2] in "\\/"


def user_model(spec: str) -> nn.Module:
    """``where:name``: import ``where`` (a module, or a ``.py`` file), follow ``name`` and build it."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ModelError(f"malformed model spec {spec!r}: write {FORMS}")
    return _build(_attribute(_module_from(where), name, where), spec)


def _module_from(where: str) -> Any:
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise ModelError(f"cannot read {where}: no such file")
        name = f"_dispatchtrace_user_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ModelError(f"cannot load {where} as Python source")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up here
        try:
            spec.loader.exec_module(module)
        except OSError as e:
            raise ModelError(f"cannot read {where}: {e.strerror or e}") from e
        except SyntaxError as e:
            raise ModelError(f"cannot load {where}: syntax error on line {e.lineno}: {e.msg}") from e
        except Exception as e:
            raise ModelError(f"importing {where} raised {one_line(e)}") from e
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise ModelError(f"cannot import {where!r} ({e}); is it installed, or is the current directory on PYTHONPATH?") from e
    except Exception as e:
        raise ModelError(f"importing {where} raised {one_line(e)}") from e


def _attribute(module: Any, name: str, where: str) -> Any:
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, nn.Module)
                           and f"{getattr(v, '__module__', '')}.".startswith(f"{module.__name__}."))
            hint = f"; modules defined there: {', '.join(found)}" if found else ""
            raise ModelError(f"{where} has no attribute {name!r}{hint}")
        obj = getattr(obj, part)
    return obj


def _build(obj: Any, spec: str) -> nn.Module:
    if isinstance(obj, nn.Module):
        return obj
    if not callable(obj):
        raise ModelError(f"{spec} is a {type(obj).__name__}, not an nn.Module class or a function returning one")
    try:
        model = obj()
    except TypeError as e:
        if "argument" not in str(e):
            raise
        raise ModelError(f"cannot build {spec} without arguments ({one_line(e)}); point at a function that builds it") from e
    if not isinstance(model, nn.Module):
        kind = type(model).__name__
        raise ModelError(f"{spec}() returned {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}, not an nn.Module")
    return model
