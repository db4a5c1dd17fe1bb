"""dispatchtrace: see what a PyTorch model actually runs, op by op, module call by module call."""

from . import models as models
from ._version import __version__ as __version__
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
