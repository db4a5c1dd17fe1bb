"""Model specs and input shapes as the command line spells them: ``resnet50``, ``pkg.mod:make``, ``file.py:Net``, ``1x3x224x224``."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from .._text import one_line
from ._errors import CliError

#: models that ship with dispatchtrace (``dispatchtrace.models``), by lower-case name
BUILTIN = {"coolcnn": "CoolCNN"}
DEFAULT_SHAPE = (1, 3, 224, 224)
_SHAPE = "a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224"
_FORMS = "a torchvision model name (resnet50), package.module:factory, or path/to/file.py:Name"


def load_model(spec: str, *, device: str = "cpu", dtype: torch.dtype | None = None) -> nn.Module:
    """Build the model ``spec`` names, in eval mode, with its parameters on ``device``.

    A floating-point ``dtype`` (``torch.bfloat16``) casts the model's floating-point parameters
    and buffers to it, as ``model.to(dtype)`` does; other dtypes (``torch.int64`` token ids) are
    for the inputs only and leave the model as it is.

    ``spec`` is a torchvision model name (built with ``weights=None``), ``coolcnn`` (the seed
    model), ``package.module:factory`` or ``path/to/file.py:Name``, where the factory is an
    ``nn.Module`` subclass, a function returning a module, or a module instance. On ``meta``
    the model is built there directly, so no memory is spent on weights.

    >>> load_model("coolcnn").training
    False
    >>> load_model("coolcnn", dtype=torch.bfloat16).output_layer.weight.dtype
    torch.bfloat16
    >>> load_model("resnet5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: unknown model 'resnet5'; did you mean resnet50 ...MODEL is ...
    """
    try:
        with _on(device):
            model = _load(spec)
    except CliError:
        raise
    except Exception as e:
        if device != "meta":
            raise CliError(f"building {spec} raised {one_line(e)}") from e
        # some constructors compute with tensor data (torchvision's RegNet); build on cpu, then move
        try:
            model = _load(spec)
        except Exception as e2:
            raise CliError(f"building {spec} raised {one_line(e2)}") from e2
    if device == "meta" and any(t.device.type != "meta" for t in (*model.parameters(), *model.buffers())):
        model = model.to("meta")
    if dtype is not None and dtype.is_floating_point:
        model = model.to(dtype)
    return model.eval()


def _load(spec: str) -> nn.Module:
    if ":" in spec and not _is_drive(spec):
        where, _, name = spec.rpartition(":")
        if not where or not name:
            raise CliError(f"malformed model spec {spec!r}: write {_FORMS}")
        return _build(_attribute(_module_from(where), name, where), spec)
    if spec.endswith(".py"):
        raise CliError(f"say which model in {spec} to build: {spec}:ClassName (or :function_name)")
    if spec.lower() in BUILTIN:
        from .. import models

        return getattr(models, BUILTIN[spec.lower()])()
    return _torchvision(spec)


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1x3x224x224"`` (or ``1,3,224,224``) as a shape; every size a whole number >= 1.

    >>> parse_shape("1x3x224x224"), parse_shape("8,128"), parse_shape("16")
    ((1, 3, 224, 224), (8, 128), (16,))
    >>> parse_shape("1x3xa")
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: malformed input shape '1x3xa': a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224
    >>> parse_shape("-1x3x2x2")
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: input shape '-1x3x2x2' has a negative size (-1): a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224
    """
    parts = text.strip().lower().replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise CliError(f"malformed input shape {text!r}: {_SHAPE}") from None
    bad = [s for s in shape if s < 1]
    if bad:
        what = f"a negative size ({bad[0]})" if bad[0] < 0 else "a size of 0 (an empty tensor)"
        raise CliError(f"input shape {text!r} has {what}: {_SHAPE}")
    return shape


def parse_dtype(text: str) -> torch.dtype:
    """``"float32"``, ``"bf16"``, ``"int64"`` as a ``torch.dtype``.

    >>> parse_dtype("float16"), parse_dtype("bf16"), parse_dtype("torch.int64")
    (torch.float16, torch.bfloat16, torch.int64)
    """
    name = text.strip().removeprefix("torch.")
    name = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64", "i32": "int32"}.get(name, name)
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise CliError(f"unknown dtype {text!r}: use a torch dtype name such as float32, bfloat16, float16 or int64")
    return dtype


def parse_inputs(shapes: Sequence[str | tuple[int, ...]] = (), *, dtype: str | torch.dtype = "float32",
                 device: str = "cpu", model: nn.Module | None = None) -> list[torch.Tensor]:
    """One random tensor per shape: ``torch.randn`` for float dtypes, small ints for integer ones.

    With no shapes, the model's ``input_shape`` attribute if it has one, else ``1x3x224x224``.
    On ``meta`` the tensors have no data.

    >>> [tuple(t.shape) for t in parse_inputs(["2x3", "4"])]
    [(2, 3), (4,)]
    >>> parse_inputs(["5"], dtype="int64")[0].dtype
    torch.int64
    """
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    if not shapes:
        shapes = [tuple(getattr(model, "input_shape", DEFAULT_SHAPE))]
    out = []
    for s in shapes:
        shape = parse_shape(s) if isinstance(s, str) else tuple(s)
        if device == "meta":
            out.append(torch.empty(shape, dtype=dt, device="meta"))
        elif dt.is_floating_point or dt.is_complex:
            out.append(torch.randn(shape, dtype=dt, device=device))
        elif dt == torch.bool:
            out.append(torch.randint(0, 2, shape, device=device).bool())
        else:
            out.append(torch.randint(0, 2, shape, dtype=dt, device=device))
    return out


@contextlib.contextmanager
def _on(device: str) -> Iterator[None]:
    if device == "cpu":
        yield
        return
    try:
        ctx = torch.device(device)
    except RuntimeError as e:
        raise CliError(f"unknown device {device!r}: use cpu, meta or cuda") from e
    if ctx.type == "cuda" and not torch.cuda.is_available():
        raise CliError(f"--device {device}: torch sees no CUDA device here (torch.cuda.is_available() is False); "
                       "use --device cpu, or meta for shapes only")
    with ctx:
        yield


def _is_drive(spec: str) -> bool:
    return len(spec) > 2 and spec[1] == ":" and spec[0].isalpha() and spec[2] in "\\/"


def _module_from(where: str) -> Any:
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise CliError(f"cannot read {where}: no such file")
        name = f"_dispatchtrace_user_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CliError(f"cannot load {where} as Python source")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up here
        try:
            spec.loader.exec_module(module)
        except OSError as e:
            raise CliError(f"cannot read {where}: {e.strerror or e}") from e
        except SyntaxError as e:
            raise CliError(f"cannot load {where}: syntax error on line {e.lineno}: {e.msg}") from e
        except Exception as e:
            raise CliError(f"importing {where} raised {one_line(e)}") from e
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise CliError(f"cannot import {where!r} ({e}); is it installed, or is the current directory on PYTHONPATH?") from e
    except Exception as e:
        raise CliError(f"importing {where} raised {one_line(e)}") from e


def _attribute(module: Any, name: str, where: str) -> Any:
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, nn.Module)
                           and f"{getattr(v, '__module__', '')}.".startswith(f"{module.__name__}."))
            hint = f"; modules defined there: {', '.join(found)}" if found else ""
            raise CliError(f"{where} has no attribute {name!r}{hint}")
        obj = getattr(obj, part)
    return obj


def _build(obj: Any, spec: str) -> nn.Module:
    if isinstance(obj, nn.Module):
        return obj
    if not callable(obj):
        raise CliError(f"{spec} is a {type(obj).__name__}, not an nn.Module class or a function returning one")
    try:
        model = obj()
    except TypeError as e:
        if "argument" not in str(e):
            raise
        raise CliError(f"cannot build {spec} without arguments ({one_line(e)}); point at a function that builds it") from e
    if not isinstance(model, nn.Module):
        raise CliError(f"{spec}() returned a {type(model).__name__}, not an nn.Module")
    return model


def _torchvision(name: str) -> nn.Module:
    try:
        import torchvision
    except Exception as error:  # noqa: BLE001 - not installed, or built for another torch
        raise CliError(f"{name!r} names a torchvision model, and torchvision does not import here "
                       f"({type(error).__name__}: {error}); install the torchvision release built for "
                       f"torch {torch.__version__.split('+')[0]}, or give MODEL as package.module:factory "
                       f"or path/to/file.py:Name") from None

    names = torchvision.models.list_models()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise CliError(f"unknown model {name!r}; {hint}MODEL is {_FORMS}")
    return torchvision.models.get_model(name, weights=None)

