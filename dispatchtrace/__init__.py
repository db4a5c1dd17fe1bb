"""dispatchtrace: see what a PyTorch model actually runs, op by op, module call by module call."""

from .capture import capture
from .depth import Depth
from .graph import Call, Graph, Op
from .lint import LintError
from .ranks import load_ranks, rank_path
from .render.errors import DotFailedError, DotNotFoundError
from .render.ranks import write_ranks
from .replay import ReplayError
from .serialize import FormatError, load
from .tensors import TensorRef
from .verify import verify

__all__ = [
    "Call", "Depth", "DotFailedError", "DotNotFoundError", "FormatError", "Graph", "LintError", "Op", "ReplayError",
    "TensorRef",
    "capture", "load", "load_ranks", "rank_path", "verify", "write_ranks",
]
__version__ = "0.1.0"
