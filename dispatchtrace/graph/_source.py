"""``Source``: the user-code line an op or a call was issued from."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Source:
    """A source line: ``file``, ``line``, ``function`` and the stripped ``text`` of that line."""

    file: str
    line: int
    function: str
    text: str

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} in {self.function}: {self.text}"
