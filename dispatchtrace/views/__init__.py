"""Views: pure functions from a captured graph to smaller frozen records that print themselves."""

from ._attrs import attributes, attributes_text
from ._collapse import Cluster, CollapsedGraph, Edge, Node, Predicate, collapse_at
from ._collectives import Collective, Collectives, collectives
from ._costs import Costs, costs, tensor_bytes
from ._depths import collapse, resolve_depth
from ._diff import CallDiff, Diff, OpPair, diff
from ._diff import report as diff_report
from ._estimate import Estimate, estimate
from ._estimate_comms import collective_size
from ._estimate_metrics import ESTIMATE_METRICS, forget_estimate, shown_estimate
from ._fold import foldable_runs
from ._labels import call_label, run_label
from ._layers import layering
from ._layouts import Layout
from ._memory import Memory, memory
from ._metric_defs import BUILTIN as BUILTIN_METRICS
from ._metrics import (
    PLACES,
    Metric,
    all_metrics,
    capture_of,
    metrics,
    register_metric,
    shared,
    unregister_metric,
    with_stats,
)
from ._mismatch import agreement_key, mismatch, sequences
from ._noise import noise_ops
from ._nonfinite import NonFinite, NonFiniteKind, first_nonfinite, has_stats
from ._phases import has_backward, phase_graph
from ._query import CallRef, calls_of, find_calls, find_ops, matches, ops_between, search
from ._rank_estimates import RankEstimates, estimate_ranks
from ._summary import Summary, summary
from ._time_metrics import TIME_METRICS, seconds, timed
from ._timeline import Span, Timeline, measured_timeline, timeline
from ._tree import Tree, tree

__all__ = [
    "BUILTIN_METRICS", "CallDiff", "CallRef", "Cluster", "CollapsedGraph", "Collective", "Collectives", "Costs",
    "Diff", "ESTIMATE_METRICS", "Edge", "Estimate", "Layout", "Memory", "Metric", "Node", "NonFinite",
    "NonFiniteKind", "OpPair", "PLACES", "Predicate", "RankEstimates", "Span", "Summary", "TIME_METRICS", "Timeline",
    "Tree", "agreement_key", "all_metrics", "attributes", "attributes_text", "call_label", "calls_of", "capture_of",
    "collapse", "collapse_at", "collective_size", "collectives", "costs", "diff", "diff_report", "estimate", "estimate_ranks",
    "find_calls", "find_ops", "first_nonfinite", "foldable_runs", "forget_estimate", "has_backward", "has_stats",
    "layering", "matches", "measured_timeline", "memory", "metrics", "mismatch", "noise_ops", "ops_between",
    "phase_graph", "register_metric", "resolve_depth", "run_label", "search", "seconds", "sequences", "shared",
    "shown_estimate", "summary", "tensor_bytes", "timed", "timeline", "tree", "unregister_metric", "with_stats",
]
