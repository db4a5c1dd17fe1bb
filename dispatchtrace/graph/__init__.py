"""The data model: every record a capture or a saved file holds, the one builder, users, depth and lint.

A leaf: nothing here imports a layer above it (``Graph``'s methods are doors that import the view,
renderer or replay they call inside the method). ``docs/semantics.md`` says what each record means.
"""

from ._arguments import Construction, input_construction
from ._builder import GraphBuilder
from ._depth import AUTO_DIAGRAM_NODES, AUTO_TREE_LINES, AUTO_VIEWER_BOXES, Depth, check_depth
from ._dtensor import DTensorOp
from ._graph import Graph
from ._group import Group, is_collective, ranks_text
from ._literal import Literal
from ._opaque import Opaque
from ._overload import overload_of
from ._records import (
    PHASE_VIEWS,
    PHASES,
    Call,
    Child,
    Op,
    Phase,
    PhaseView,
    Rare,
    Saved,
    new_call,
    op_ranges,
    times_sum,
    within,
)
from ._source import Source
from ._stats import Stats, relative
from ._tensors import Kind, TensorRef, itemsize, shape_text, shares_storage
from ._users import Users

__all__ = [
    "AUTO_DIAGRAM_NODES", "AUTO_TREE_LINES", "AUTO_VIEWER_BOXES", "PHASES", "PHASE_VIEWS",
    "Call", "Child", "Construction", "DTensorOp", "Depth", "Graph", "GraphBuilder", "Group", "Kind", "Literal", "Op",
    "Opaque", "Phase", "PhaseView", "Rare", "Saved", "Source", "Stats", "TensorRef", "Users",
    "check_depth", "input_construction", "is_collective", "itemsize", "new_call", "op_ranges", "overload_of", "ranks_text",
    "relative", "times_sum", "within",
    "shape_text", "shares_storage",
]
