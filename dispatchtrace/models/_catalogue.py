"""Any model by name, with its example inputs: ``build("hf:gpt2")``, ``build("timm:convnext_tiny")``, ``build("resnet50")``.

>>> import dispatchtrace as dt
>>> model, args, kwargs = dt.models.build("coolcnn")
>>> type(model).__name__, [tuple(a.shape) for a in args], kwargs
('CoolCNN', [(1, 3, 32, 32)], {})
>>> dt.models.build("resnet5")  # doctest: +ELLIPSIS
Traceback (most recent call last):
dispatchtrace.errors.ModelError: unknown model 'resnet5'; did you mean resnet50 ...
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
import torch.nn as nn

from .._text import human, one_line
from ..errors import ModelError, ModelTooLargeError
from . import _hf, _timm
from ._close import close_matches
from ._hf import Task
from ._tensors import check_device, on, random_tensor
from ._user import FORMS as USER_FORMS
from ._user import is_drive, user_model
from .coolcnn import CoolCNN

Catalogue = Literal["torchvision", "hf", "timm", "builtin"]
#: models that ship with dispatchtrace, by lower-case name
BUILTIN: dict[str, Callable[[], nn.Module]] = {"coolcnn": CoolCNN}
DEFAULT_SHAPE = (1, 3, 224, 224)
FORMS = ("a torchvision model name (resnet50), coolcnn, hf:TYPE (a transformers model type: hf:gpt2), "
         f"timm:NAME (timm:convnext_tiny), {USER_FORMS}")


class Built(NamedTuple):
    """What ``build`` returns: the model (eval mode) and example inputs, to call as ``model(*args, **kwargs)``."""

    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Size:
    """How big a model is before it is built for real (counted on meta): parameters and buffer elements, their bytes."""

    spec: str
    cls: str
    params: int
    nbytes: int
    dtype: str = "float32"

    @classmethod
    def of(cls, model: nn.Module, spec: str, dtype: torch.dtype | None = None) -> Size:
        """The size of a built ``model`` (any device), its float tensors counted in ``dtype`` when that is a float dtype."""
        cast = dtype if dtype is not None and dtype.is_floating_point else None
        params = sum(p.numel() for p in model.parameters())
        nbytes = sum(t.numel() * (cast.itemsize if cast is not None and t.is_floating_point() else t.element_size())
                     for t in (*model.parameters(), *model.buffers()))
        return cls(spec, type(model).__name__, params, nbytes, str(cast or torch.float32).removeprefix("torch."))

    def __str__(self) -> str:
        return f"{self.spec} is {self.cls}: {human(self.params)} parameters, {human(self.nbytes, 'B')} of weights in {self.dtype}"


@dataclass(frozen=True)
class _Plain:
    """A torchvision, built-in or user model: built by ``make``; example inputs one image (``input_shape``)."""

    make_it: Callable[[], nn.Module]
    cls_name: str
    image_size: int | None = None

    def make(self) -> nn.Module:
        return self.make_it()


def build(spec: str, *, config: Mapping[str, Any] | None = None, task: Task | None = None, seq: int | None = None,
          batch: int = 1, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
          max_bytes: float | None = None) -> Built:
    """Build the model ``spec`` names (random weights, nothing downloaded) and example inputs for it.

    ``spec``: a torchvision name (``resnet50``, ``weights=None``), ``coolcnn``, ``hf:TYPE`` (a
    ``transformers`` model type: ``AutoConfig.for_model(TYPE, **config)``, the class by ``task``:
    ``causal-lm``, ``masked-lm``, ``seq2seq`` or ``base``, by default the first of seq2seq, masked-lm,
    causal-lm, base it has), ``timm:NAME`` (``timm.create_model(NAME, pretrained=False, **config)``),
    ``package.module:factory`` or ``path/to/file.py:Name``. ``config``: config overrides for ``hf:``,
    keyword arguments of the constructor for ``timm:`` and torchvision (``image_size=64``).

    The inputs come from the model: token ids of length ``seq`` (default 16, at most the model's
    positions) for text models, the encoder-decoder pair for seq2seq, pixel values at the config's
    image size, input features for speech; else one ``input_shape`` (or ``1x3x224x224``) tensor,
    random ``0``/``1`` ids when ``dtype`` is an integer dtype. A floating-point ``dtype`` casts the
    model and the float inputs. On ``device="meta"`` the model is built there directly and the inputs
    hold no data (a 7B default Llama in a tenth of a second once ``transformers`` is imported). On the CPU an ``hf:`` or ``timm:`` model
    whose weights exceed ``max_bytes`` (default: half the memory available, ``memory_budget()``) is
    refused with a ``ModelTooLargeError`` instead of swapping; ``size()`` says how big it is.
    """
    dev = check_device(device or "cpu")
    entry = _entry(spec, config or {}, task, seq)
    floats = dtype if dtype is not None and dtype.is_floating_point else torch.float32
    if not isinstance(entry, _Plain) and dev.type == "cpu":
        check_budget(size(spec, config=config, task=task, dtype=dtype), max_bytes)
    model = _make(entry, spec, dev)
    if dtype is not None and dtype.is_floating_point:
        model = model.to(dtype)
    model.eval()
    if isinstance(entry, _Plain):
        shape = getattr(model, "input_shape", None)
        shape = tuple(shape) if shape is not None else (batch, 3, entry.image_size or 224, entry.image_size or 224)
        return Built(model, (random_tensor(shape, dtype or torch.float32, dev),), {})
    args, kwargs = entry.inputs(seq=seq, batch=batch, device=dev, dtype=floats)
    return Built(model, args, kwargs)


def inputs(spec: str, *, config: Mapping[str, Any] | None = None, task: Task | None = None, seq: int | None = None,
           batch: int = 1, device: str | torch.device | None = None,
           dtype: torch.dtype | None = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Fresh example inputs ``(args, kwargs)`` for ``spec`` as ``build`` makes them, without building the model
    (``hf:`` and ``timm:``; drawn from the global random state, so a seed gives the same ones).

    >>> args, kwargs = inputs("hf:gpt2", config={"n_layer": 2}, seq=8)  # doctest: +SKIP
    >>> kwargs["input_ids"].shape  # doctest: +SKIP
    torch.Size([1, 8])
    """
    entry = _entry(spec, config or {}, task, seq)
    if isinstance(entry, _Plain):
        raise ModelError(f"inputs() makes the inputs of hf: and timm: models; {spec}'s come with build()")
    floats = dtype if dtype is not None and dtype.is_floating_point else torch.float32
    return entry.inputs(seq=seq, batch=batch, device=check_device(device or "cpu"), dtype=floats)


def size(spec: str, *, config: Mapping[str, Any] | None = None, task: Task | None = None,
         dtype: torch.dtype | None = None) -> Size:
    """How big ``spec`` is, counted on a meta build (no weight memory): parameters and the bytes of its
    parameters and buffers, in ``dtype`` when that is a floating-point dtype.

    >>> print(size("coolcnn"))
    coolcnn is CoolCNN: 269 k parameters, 1.1 MB of weights in float32
    """
    return Size.of(_make(_entry(spec, config or {}, task, None), spec, torch.device("meta")), spec, dtype)


def memory_budget() -> int | None:
    """Half the memory available now (``MemAvailable`` of ``/proc/meminfo``, else the free pages); ``None`` if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return None


def check_budget(found: Size, max_bytes: float | None = None) -> None:
    """Refuse (``ModelTooLargeError``) a model whose weights exceed ``max_bytes`` (default ``memory_budget()``)."""
    budget = memory_budget() if max_bytes is None else max_bytes
    if budget is None or found.nbytes <= budget:
        return
    raise ModelTooLargeError(
        f"{found}, above the memory budget of {human(int(budget), 'B')} on the CPU "
        f"({'half the memory available' if max_bytes is None else 'max_bytes'}); build it on meta "
        "(device='meta', --device meta: shapes and ops, no weight memory) or make it smaller "
        "(config=, --config num_hidden_layers=2)", found.nbytes, int(budget))


def names(catalogue: Catalogue = "torchvision") -> list[str]:
    """The names a catalogue builds: ``names("hf")`` the transformers model types, ``names("timm")`` timm's models."""
    if catalogue == "hf":
        return _hf.model_types()
    if catalogue == "timm":
        return _timm.model_names()
    if catalogue == "builtin":
        return sorted(BUILTIN)
    if catalogue == "torchvision":
        return list(_torchvision(catalogue).models.list_models())
    raise ModelError(f"unknown catalogue {catalogue!r}: use torchvision, hf, timm or builtin")


def _torchvision(name: str) -> Any:
    """``torchvision``, or a ``ModelError`` saying what to do when it does not import (not installed, or built
    for another torch: PyPI's torchvision beside a CPU build of torch 2.13)."""
    try:
        import torchvision
    except Exception as error:  # noqa: BLE001 - not installed, or built for another torch
        raise ModelError(f"{name!r} names a torchvision model, and torchvision does not import here "
                         f"({type(error).__name__}: {error}); install the torchvision release built for "
                         f"torch {torch.__version__.split('+')[0]}, or give MODEL as package.module:factory "
                         f"or path/to/file.py:Name") from None
    return torchvision


def parse_config(items: Iterable[str]) -> dict[str, Any]:
    """``["num_hidden_layers=2", "act='gelu'"]`` as config overrides; values read as Python literals, else strings.

    >>> parse_config(["num_hidden_layers=2", "hidden_act=gelu", "image_size=[64, 64]", "use_cache=False"])
    {'num_hidden_layers': 2, 'hidden_act': 'gelu', 'image_size': [64, 64], 'use_cache': False}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ModelError(f"malformed config override {item!r}: write key=value, e.g. num_hidden_layers=2")
        try:
            value: Any = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        out[key.strip()] = value
    return out


def _entry(spec: str, config: Mapping[str, Any], task: Task | None, seq: int | None) -> Any:
    kind, _, rest = spec.partition(":")
    if kind in ("hf", "timm") and rest:
        if kind == "hf":
            return _hf.resolve(rest, dict(config), task)
        _only(spec, task=task, seq=seq)
        return _timm.resolve(rest, dict(config))
    _only(spec, task=task, seq=seq)
    if ":" in spec and not is_drive(spec):
        _only(spec, config=config)
        return _Plain(lambda: user_model(spec), spec)
    if spec.endswith(".py"):
        raise ModelError(f"say which model in {spec} to build: {spec}:ClassName (or :function_name)")
    if spec.lower() in BUILTIN:
        _only(spec, config=config)
        return _Plain(BUILTIN[spec.lower()], spec)
    torchvision = _torchvision(spec)
    if spec not in torchvision.models.list_models():
        raise ModelError(f"unknown model {spec!r}; {_did_you_mean(spec)}MODEL is {FORMS}")
    kwargs = dict(config)
    size = kwargs.get("image_size")
    return _Plain(lambda: torchvision.models.get_model(spec, weights=None, **kwargs), spec,
                  image_size=size if isinstance(size, int) else None)


def _only(spec: str, **given: Any) -> None:
    """Refuse options the spec's catalogue does not take (``task=`` is for ``hf:``)."""
    for name, value in given.items():
        if value:
            where = {"task": "hf: models", "seq": "hf: models (token ids)", "config": "hf:, timm: and torchvision models"}[name]
            raise ModelError(f"{name}= (--{name}) applies to {where}, not to {spec}")


def _make(entry: Any, spec: str, device: torch.device) -> nn.Module:
    try:
        with on(device):
            model = entry.make()
    except ModelError:
        raise
    except Exception as e:
        if device.type != "meta" or not isinstance(entry, _Plain):
            raise ModelError(f"building {spec} raised {one_line(e)}") from e
        try:  # some constructors compute with tensor data (torchvision's RegNet): build on cpu, then move
            model = entry.make()
        except ModelError:
            raise
        except Exception as e2:
            raise ModelError(f"building {spec} raised {one_line(e2)}") from e2
    if device.type == "meta" and any(t.device.type != "meta" for t in (*model.parameters(), *model.buffers())):
        model = model.to("meta")
    return model


def _did_you_mean(name: str) -> str:
    """Close names from the first catalogue that has any: a transformers model type or timm model of that name, torchvision
    names, the model type a checkpoint name starts with (``bert-base-uncased``), transformers' model types,
    then timm's names (a catalogue not installed is skipped)."""
    types = _installed(_hf.model_types)
    close = [f"hf:{name}"] if name in types else [f"timm:{name}"] if _installed_timm(name) else []
    if not close:
        close = close_matches(name, names("torchvision") + sorted(BUILTIN))
    guess = _hf.guess_type(name, types) if types and not close else None
    if guess:
        close = [f"hf:{guess}"]
    if not close and types:
        close = [f"hf:{c}" for c in close_matches(name.lower(), types)]
    if not close:
        close = [f"timm:{c}" for c in close_matches(name, _installed(_timm.model_names))]
    return f"did you mean {' or '.join(close)}? " if close else ""


def _installed_timm(name: str) -> bool:
    try:
        return bool(_timm.timm().is_model(name))
    except ModelError:
        return False


def _installed(names_of: Callable[[], list[str]]) -> list[str]:
    try:
        return names_of()
    except ModelError:
        return []
