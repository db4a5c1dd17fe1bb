"""Module attributes a summary shows (kernel size, stride, ...) and parameters split into trainable and frozen.

Read from the live module (``call.module``) when the summary is made: a loaded capture, or one whose
model is gone, has ``None`` for them.

>>> import torch
>>> conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
>>> attributes(conv)
{'kernel_size': (3, 3), 'stride': (2, 2), 'padding': (1, 1), 'dilation': (1, 1), 'groups': 1, 'in_channels': 3, 'out_channels': 8}
>>> attributes_text(attributes(conv))
'k=3 s=2 p=1'
>>> _ = conv.bias.requires_grad_(False)
>>> trainable_frozen(conv)
(216, 8)
"""

from __future__ import annotations

from typing import Any

import torch.nn as nn

ATTRIBUTES = ("kernel_size", "stride", "padding", "dilation", "groups", "in_channels", "out_channels",
              "in_features", "out_features", "num_heads", "num_embeddings", "embedding_dim", "eps")
"""The module attributes read into ``Row.attrs``, where the module is one of ``torch.nn``'s layers
(or a subclass of one) and has them with a plain value (ints, tuples of ints, floats, strings)."""

SHORT = {"kernel_size": "k", "stride": "s", "padding": "p", "dilation": "d", "groups": "g", "num_heads": "heads"}
"""The attributes the table shows, as ``k=3 s=2 p=1 d=2 g=32 heads=12``; values at their default
(stride 1, padding 0, dilation 1, groups 1) are left out of the text, kept in ``Row.attrs``."""

_DEFAULT = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def attributes(module: Any) -> dict[str, Any] | None:
    """``ATTRIBUTES`` that ``module`` has with a plain value; ``None`` when there is no module."""
    if module is None:
        return None
    out: dict[str, Any] = {}
    if not _torch_layer(module):
        return out
    for name in ATTRIBUTES:
        value = getattr(module, name, None)
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, bool) or not _plain(value):
            continue
        out[name] = value
    return out


def _torch_layer(module: Any) -> bool:
    """Whether ``module`` is (a subclass of) one of ``torch.nn``'s layers: a model's own ``groups``
    or ``dilation`` attribute (torchvision's ResNet has both) is not a layer setting."""

    plain = (nn.Module, nn.Sequential, nn.ModuleList, nn.ModuleDict)
    return any(c.__module__.startswith("torch.nn.modules.") and c not in plain for c in type(module).__mro__)


def _plain(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return isinstance(value, (int, float, str))


def _compact(value: Any) -> str:
    """``(3, 3)`` as ``3``, ``(3, 1)`` as ``3×1``."""
    if isinstance(value, tuple):
        if value and all(v == value[0] for v in value):
            return str(value[0])
        return "×".join(str(v) for v in value)
    return str(value)


def attributes_text(attrs: dict[str, Any] | None) -> str:
    """``k=3 s=2 p=1``: the ``SHORT`` attributes not at their default; ``?`` when unknown."""
    if attrs is None:
        return "?"
    parts = []
    for name, key in SHORT.items():
        if name not in attrs:
            continue
        value = attrs[name]
        text = _compact(value)
        if name in _DEFAULT and text == str(_DEFAULT[name]):
            continue
        parts.append(f"{key}={text}")
    return " ".join(parts)


def trainable_frozen(module: Any) -> tuple[int | None, int | None]:
    """Elements of ``module``'s parameters (its children's included, each tensor once) that
    require grad, and that do not; ``(None, None)`` when there is no module."""
    if module is None:
        return None, None
    trainable = frozen = 0
    for p in module.parameters():  # parameters() yields a shared (tied) tensor once
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return trainable, frozen
