"""dispatchtrace: see what a PyTorch model actually runs, op by op, module call by module call."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:  # what the names below are; they load on first use (``__getattr__``), so `import dispatchtrace` is light
    from . import models as models
    from .errors import (
        DiagramTooLargeError,
        DotFailedError,
        DotNotFoundError,
        FormatError,
        KeepBudgetError,
        LintError,
        ModelError,
        ModelTooLargeError,
        NotKeptError,
        NoValuesError,
        ReplayError,
        SavedError,
        SpecError,
    )
    from .graph import Call, Depth, Graph, Op, TensorRef
    from .hardware import DeviceSpec
    from .recording import capture
    from .render import write_diff, write_ranks
    from .replay import verify
    from .serialize import load, load_ranks, rank_path
    from .views import Estimate, Metric, RankEstimates, diff, estimate_ranks, register_metric, unregister_metric

__all__ = [
    "Call", "Depth", "DeviceSpec", "DiagramTooLargeError", "DotFailedError", "DotNotFoundError", "Estimate",
    "FormatError", "Graph", "KeepBudgetError", "LintError", "Metric", "ModelError", "ModelTooLargeError",
    "NoValuesError", "NotKeptError", "Op", "RankEstimates", "ReplayError", "SavedError", "SpecError", "TensorRef",
    "capture", "diff", "estimate_ranks", "load", "load_ranks", "rank_path", "register_metric", "unregister_metric",
    "verify", "write_diff", "write_ranks",
]

#: where each name of the facade lives; imported when first read, so the command line's ``--version`` and
#: ``--help`` answer without importing torch
_HOMES = {
    **dict.fromkeys(("DiagramTooLargeError", "DotFailedError", "DotNotFoundError", "FormatError", "KeepBudgetError",
                     "LintError", "ModelError", "ModelTooLargeError", "NotKeptError", "NoValuesError", "ReplayError",
                     "SavedError", "SpecError"), "errors"),
    **dict.fromkeys(("Call", "Depth", "Graph", "Op", "TensorRef"), "graph"),
    **dict.fromkeys(("Estimate", "Metric", "RankEstimates", "diff", "estimate_ranks", "register_metric",
                     "unregister_metric"), "views"),
    "DeviceSpec": "hardware", "capture": "recording", "write_diff": "render", "write_ranks": "render",
    "verify": "replay", "load": "serialize", "load_ranks": "serialize", "rank_path": "serialize",
}
_PACKAGES = ("cli", "errors", "graph", "hardware", "models", "recording", "render", "replay", "serialize", "views")


def __getattr__(name: str) -> Any:
    """A name of the facade (``dt.capture``) or a layer (``dt.views``), imported on first use."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    elif name in _PACKAGES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The facade's names, its layers and the module's own dunders (not what this file imports to work)."""
    return sorted({*__all__, *_PACKAGES, *(n for n in globals() if n.startswith("__"))})
