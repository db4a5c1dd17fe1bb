"""Views: pure functions from a captured graph to smaller frozen records that print themselves."""

from ._attrs import attributes, attributes_text
from ._collapse import CollapsedGraph, Edge, Group, Node, Predicate, collapse, resolve_depth
from ._collectives import Collective, Collectives, collectives
from ._costs import Costs, costs
from ._fold import foldable_runs
from ._labels import call_label, run_label
from ._layers import layering
from ._memory import Memory, memory
from ._mismatch import agreement_key, mismatch, sequences
from ._noise import noise_ops
from ._phases import phase_graph
from ._query import CallRef, calls_of, find_calls, find_ops, matches, ops_between, search
from ._summary import Summary, summary
from ._tree import Tree, tree

__all__ = [
    "CallRef", "CollapsedGraph", "Collective", "Collectives", "Costs", "Edge", "Group", "Memory", "Node", "Predicate",
    "Summary", "Tree",
    "agreement_key", "attributes", "attributes_text", "call_label", "calls_of", "collapse", "collectives", "costs", "find_calls",
    "find_ops", "foldable_runs", "layering", "matches", "memory", "mismatch", "noise_ops", "ops_between", "phase_graph",
    "resolve_depth", "run_label", "search", "sequences", "summary", "tree",
]
