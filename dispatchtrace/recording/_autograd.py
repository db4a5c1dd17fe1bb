"""The autograd side of a capture: what kind of autograd node is running, and what it was tagged with.

The capture tags each node as the forward builds it (``torch.autograd.graph.node_creation_hook``,
``node.metadata``) and reads the tag back while the node runs in backward; which node runs is
``_torch.running_node``, the private call of the package's backward support.

>>> import torch
>>> from dispatchtrace._torch import running_node
>>> w = torch.ones(2, requires_grad=True)
>>> seen = []
>>> def look(grad):
...     seen.append(type(running_node()).__name__)
>>> y = (w * 3).sum()
>>> y.grad_fn.metadata["tag"] = type(y.grad_fn).__name__  # what the capture's node creation hook does (torch 2.14+)
>>> tag(y.grad_fn, "tag"), running_node() is None
('SumBackward0', True)
>>> _ = w.register_hook(look)  # a leaf's hooks run in its AccumulateGrad node
>>> y.backward()
>>> seen
['AccumulateGrad']
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.graph import Node


def tag(node: Node, key: str) -> Any:
    """``node.metadata.get(key)``, reading no ``AccumulateGrad`` node's metadata (the capture tags none).

    ``node.metadata`` makes the node's metadata (a C++ object and a dict) where it has none: made
    for each leaf's node while backward runs, and freed only with the graph, these small blocks sit
    among the gradients' memory (on CPU, thousands of page faults per ResNet-50 training step).
    """
    if type(node).__name__ == "AccumulateGrad":
        return None
    return node.metadata.get(key)


def accumulated(node: Node) -> torch.Tensor | None:
    """The leaf tensor an ``AccumulateGrad`` node writes the gradient of, else ``None``."""
    if type(node).__name__ != "AccumulateGrad":
        return None
    variable: Any = getattr(node, "variable", None)
    return variable if isinstance(variable, torch.Tensor) else None


def is_python_function(node: Node) -> bool:
    """A node of a Python ``torch.autograd.Function`` (its forward ran several ops, or none)."""
    return isinstance(node, torch.autograd.function.BackwardCFunction)
