"""Every rank of a job estimated: each rank's step, its exposed communication, the slowest rank and the skew.

``dt.estimate_ranks(dt.load_ranks("trace.rank*.json"), "h100")`` estimates each rank's capture
(``views/_estimate.py``, collectives priced and scheduled) on one spec. A synchronous job steps at the
pace of its slowest rank: ``slowest`` names it, ``skew`` is how much longer its step is than the
fastest one's. The world is read from the captures' process groups; a set of files that misses ranks
of that world is an error naming them (``partial=True`` estimates the ranks given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..graph import Group
from ._estimate import Estimate, estimate

if TYPE_CHECKING:
    import os

    from ..graph import Graph
    from ..hardware import DeviceSpec


@dataclass(frozen=True, slots=True)
class RankEstimates:
    """The estimate of each rank (``estimates``: rank -> ``Estimate``) of a job of ``world`` ranks."""

    estimates: Mapping[int, Estimate]
    world: int

    def __getitem__(self, rank: int) -> Estimate:
        return self.estimates[rank]

    def __len__(self) -> int:
        return len(self.estimates)

    @property
    def slowest(self) -> int:
        """The rank whose estimated step is longest (the lowest such rank on a tie): the job's pace."""
        return max(self.estimates, key=lambda r: (self.estimates[r].total, -r))

    @property
    def fastest(self) -> int:
        return min(self.estimates, key=lambda r: (self.estimates[r].total, r))

    @property
    def step(self) -> float:
        """The job's estimated step: the slowest rank's."""
        return self.estimates[self.slowest].total

    @property
    def skew(self) -> float:
        """Seconds the slowest rank's step takes beyond the fastest rank's (what the fast ranks wait each step)."""
        return self.step - self.estimates[self.fastest].total

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per rank: ``rank``, ``step``, ``compute``, ``communication``, ``exposed``, ``overlap``
        (seconds, and the hidden share), ``slowest``."""
        slowest = self.slowest
        return [{"rank": r, "step": e.total, "compute": e.timeline.compute, "communication": e.communication,
                 "exposed": e.exposed, "overlap": e.overlap, "slowest": r == slowest}
                for r, e in sorted(self.estimates.items())]

    def __str__(self) -> str:
        rows = self.rows()
        if not rows:
            return "no ranks"
        spec = next(iter(self.estimates.values())).spec
        lines = [f"{len(rows)} of {self.world} ranks on {spec.title or spec.name}: step {_time(self.step)} "
                 f"(rank {self.slowest}), skew {_time(self.skew)}",
                 f"{'rank':>5}  {'step':>10}  {'compute':>10}  {'comm':>10}  {'exposed':>10}  hidden"]
        for row in rows:
            mark = "  <- slowest" if row["slowest"] and self.skew > 0 else ""
            lines.append(f"{row['rank']:>5}  {_time(row['step']):>10}  {_time(row['compute']):>10}  "
                         f"{_time(row['communication']):>10}  {_time(row['exposed']):>10}  {100 * row['overlap']:5.1f}%{mark}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<RankEstimates {len(self.estimates)} of {self.world} ranks, step {_time(self.step)}>"


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} µs"


def world_of(graphs: Mapping[int, Graph]) -> int:
    """The ranks the captures' process groups name (one past the highest global rank in any group), at least the
    number of captures: the world, or a lower bound of it when the highest ranks run no collective with these."""
    world = len(graphs)
    for graph in graphs.values():
        for op in graph.ops:
            for a in op.args:
                if isinstance(a, Group) and a.ranks:
                    world = max(world, max(a.ranks) + 1)
    return world


def estimate_ranks(ranks: Mapping[int, Graph], spec: str | os.PathLike[str] | DeviceSpec, *, partial: bool = False,
                   **options: Any) -> RankEstimates:
    """Each rank's ``Estimate`` on ``spec`` (``options``: ``ranks_per_node``, ``intra_node``, ``inter_node``, as
    ``Graph.estimate`` takes). ``ranks`` is ``{rank: Graph}`` as ``dt.load_ranks`` returns."""
    if not ranks:
        raise ValueError("no rank captures to estimate; load them with dt.load_ranks('trace.rank*.json')")
    world = world_of(ranks)
    missing = sorted(set(range(world)) - set(ranks))
    if missing and not partial:
        shown = ", ".join(map(str, missing[:8])) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        raise ValueError(f"the captures' process groups name {world} ranks (0 to {world - 1}) but there is no capture of "
                         f"rank {shown}; "
                         "pass every rank's file (dt.load_ranks('trace.rank*.json')), or partial=True to estimate "
                         "only the ranks given")
    return RankEstimates({r: estimate(g, spec, **options) for r, g in sorted(ranks.items())}, world)
