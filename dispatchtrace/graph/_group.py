"""A process group as a capture records it (``Group``), and which op targets are collectives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Group:
    """A process group as recorded: its name, the global ranks in it (group rank order), the
    global rank of the process that captured, and its backend.

    >>> g = Group("0", (0, 1, 2, 3), 1, "gloo")
    >>> str(g), g.size, g.group_rank
    ('group 0 [0-3]', 4, 1)
    """

    name: str
    ranks: tuple[int, ...]
    rank: int
    backend: str = ""

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def group_rank(self) -> int | None:
        """The capturing process's rank inside this group (``None`` when it is not a member)."""
        return self.ranks.index(self.rank) if self.rank in self.ranks else None

    def __str__(self) -> str:
        return f"group {self.name} {ranks_text(self.ranks)}"

    def __repr__(self) -> str:
        return f"Group({self.name!r}, ranks={ranks_text(self.ranks)}, rank={self.rank})"


NAMESPACES = ("c10d.", "_c10d_functional.", "_c10d_functional_autograd.", "c10d_functional.")


def is_collective(target: str) -> bool:
    """Whether an op's target is a c10d or functional collective (``wait_tensor`` included).

    >>> is_collective("c10d.allreduce_.default"), is_collective("aten.add.Tensor")
    (True, False)
    """
    return target.startswith(NAMESPACES)


def ranks_text(ranks: tuple[int, ...]) -> str:
    """``[0-63]`` for a run, ``[0, 8, 16]`` otherwise.

    >>> ranks_text((0, 1, 2, 3)), ranks_text((0, 8, 16)), ranks_text(())
    ('[0-3]', '[0, 8, 16]', '[]')
    """
    if len(ranks) > 2 and list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"[{ranks[0]}-{ranks[-1]}]"
    return f"[{', '.join(map(str, ranks))}]"
