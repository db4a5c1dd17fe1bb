"""dispatchtrace: see what a PyTorch model actually runs, op by op, module call by module call."""

from .capture import capture
from .graph import Call, Graph, Op
from .render.errors import DotFailedError, DotNotFoundError
from .replay import ReplayError
from .serialize import FormatError, load
from .tensors import TensorRef
from .verify import verify

__all__ = [
    "Call", "DotFailedError", "DotNotFoundError", "FormatError", "Graph", "Op", "ReplayError", "TensorRef",
    "capture", "load", "verify",
]
__version__ = "0.1.0"
