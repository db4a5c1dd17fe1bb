"""Where in user code an op was issued: the first stack frame outside torch and dispatchtrace."""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import CodeType

import torch

_INTERNAL = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
_USER = (os.path.join(os.path.dirname(__file__), "models.py"),)  # the bundled demo models are user code
_internal_code: set[CodeType] = set()  # code objects seen, by where they are (filled as the stack is walked)
_user_code: set[CodeType] = set()

Site = tuple[CodeType, int]


@dataclass(frozen=True, slots=True)
class Source:
    """A source line: ``file``, ``line``, ``function`` and the stripped ``text`` of that line."""

    file: str
    line: int
    function: str
    text: str

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} in {self.function}: {self.text}"


def user_site(skip: int = 1) -> Site | None:
    """The (code, line) of the innermost frame outside torch and dispatchtrace, or ``None``."""
    frame = sys._getframe(skip)
    internal = _internal_code
    while frame is not None:
        code = frame.f_code
        if code in internal:  # a set test, not a call: most frames walked are torch's own
            frame = frame.f_back
            continue
        if code in _user_code:
            return code, frame.f_lineno
        name = code.co_filename
        if name.startswith(_INTERNAL) and name not in _USER:
            internal.add(code)
            frame = frame.f_back
        else:
            _user_code.add(code)
            return code, frame.f_lineno
    return None


class SourceTable:
    """Turns recorded sites into ``Source`` records, one per distinct site."""

    def __init__(self) -> None:
        self._cache: dict[Site, Source] = {}

    def resolve(self, site: Site | None) -> Source | None:
        if site is None:
            return None
        src = self._cache.get(site)
        if src is None:
            code, line = site
            text = linecache.getline(code.co_filename, line).strip()
            src = self._cache[site] = Source(code.co_filename, line, code.co_qualname, text)
        return src

    def resolve_all(self, sites: list[Site | None]) -> list[Source | None]:
        """``[resolve(site) for site in sites]``, one call for a whole capture's sites."""
        cache = self._cache
        out: list[Source | None] = []
        for site in sites:
            if site is None:
                out.append(None)
                continue
            src = cache.get(site)
            out.append(src if src is not None else self.resolve(site))
        return out
