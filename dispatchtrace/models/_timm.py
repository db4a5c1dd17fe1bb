"""``timm:NAME``: any of timm's models by name, ``timm.create_model(name, pretrained=False)``, no download."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from ..errors import ModelError
from ._close import close_matches
from ._tensors import random_tensor

INSTALL = "pip install timm (or dispatchtrace's zoo extra: pip install 'dispatchtrace[zoo]')"


def timm() -> Any:
    """The ``timm`` package, or a ``ModelError`` saying how to install it."""
    try:
        import timm
    except ImportError as e:
        raise ModelError(f"timm: models need the timm package, which is not installed: {INSTALL}") from e
    return timm


def model_names() -> list[str]:
    """Every model name ``timm.create_model`` builds (``timm.list_models()``)."""
    return list(timm().list_models())


@dataclass(frozen=True)
class TimmModel:
    """A resolved ``timm:`` spec: the name and the keyword arguments for ``create_model`` (``img_size=64``)."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def cls_name(self) -> str:
        return self.name

    def make(self) -> nn.Module:
        try:
            return timm().create_model(self.name, pretrained=False, **self.kwargs)
        except TypeError as e:
            if not self.kwargs:
                raise
            raise ModelError(f"timm.create_model({self.name!r}, **{self.kwargs}) raised TypeError: {e}; "
                             "config= gives create_model's keyword arguments (img_size=64, num_classes=10)") from e

    def inputs(self, *, seq: int | None, batch: int, device: torch.device,
               dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """One image batch at the model's default input size (``pretrained_cfg.input_size``), or ``img_size``."""
        from timm.models import get_pretrained_cfg

        cfg = get_pretrained_cfg(self.name)
        channels, h, w = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
        size = self.kwargs.get("img_size")
        if size is not None:
            h, w = (size, size) if isinstance(size, int) else tuple(size)[-2:]
        channels = self.kwargs.get("in_chans", channels)
        return (random_tensor((batch, channels, h, w), dtype, device),), {}


def resolve(name: str, overrides: dict[str, Any]) -> TimmModel:
    """``timm:NAME`` with the name checked: an unknown one is a ``ModelError`` with close names."""
    tm = timm()
    if not tm.is_model(name):
        close = close_matches(name, model_names())
        hint = f"; did you mean {' or '.join(f'timm:{c}' for c in close)}?" if close else ""
        raise ModelError(f"unknown timm model {name!r}{hint} (timm.list_models() lists them)")
    return TimmModel(name, dict(overrides))
