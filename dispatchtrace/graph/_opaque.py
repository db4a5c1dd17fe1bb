"""``Opaque``: what a graph holds for an argument that is neither a tensor nor plain data (its type and text)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Opaque:
    """Stand-in for an argument JSON cannot hold (a Python object of another type): its text only."""

    type: str
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text
