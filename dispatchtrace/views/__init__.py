"""Views: pure functions from a captured graph to smaller frozen records that print themselves."""

from ._attrs import attributes, attributes_text
from ._collapse import Cluster, CollapsedGraph, Edge, Node, Predicate, collapse_at
from ._collectives import Collective, Collectives, collectives
from ._costs import Costs, costs
from ._depths import collapse, resolve_depth
from ._diff import CallDiff, Diff, OpPair, diff
from ._fold import foldable_runs
from ._labels import call_label, run_label
from ._layers import layering
from ._layouts import Layout
from ._memory import Memory, memory
from ._mismatch import agreement_key, mismatch, sequences
from ._noise import noise_ops
from ._nonfinite import NonFinite, first_nonfinite, has_stats
from ._phases import has_backward, phase_graph
from ._query import CallRef, calls_of, find_calls, find_ops, matches, ops_between, search
from ._summary import Summary, summary
from ._tree import Tree, tree

__all__ = [
    "CallDiff", "CallRef", "Cluster", "CollapsedGraph", "Collective", "Collectives", "Costs", "Diff", "Edge", "Layout", "Memory", "Node",
    "NonFinite", "OpPair", "Predicate", "Summary", "Tree",
    "agreement_key", "attributes", "attributes_text", "call_label", "calls_of", "collapse", "collapse_at", "collectives",
    "costs", "diff", "find_calls", "find_ops", "first_nonfinite", "foldable_runs", "has_backward", "has_stats", "layering",
    "matches", "memory", "mismatch", "noise_ops", "ops_between", "phase_graph",
    "resolve_depth", "run_label", "search", "sequences", "summary", "tree",
]
