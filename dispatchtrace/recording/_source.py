"""Where in user code an op was issued: the first stack frame outside torch and dispatchtrace."""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Sequence
from types import CodeType
from typing import Any

import torch

from ..graph import Source

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The ``dispatchtrace`` package: every frame in it is the capture's own, but for the bundled models'."""
_INTERNAL = (os.path.dirname(torch.__file__) + os.sep, _ROOT + os.sep)
_USER = os.path.join(_ROOT, "models") + os.sep  # the bundled demo models (``dispatchtrace.models``) are user code
# Files seen, by where they are (filled as the stack is walked): a file name caches its hash, a code
# object's is computed anew at every call from its name, bytecode and constants (0.5-1 µs).
_internal_files: set[str] = set()
_user_files: set[str] = set()
_user_code: dict[int, CodeType] = {}  # the code of every site made, by id: held, so an id here is never reused

Site = tuple[int, int]
"""``(id(code), f_lasti)`` of a user frame: the instruction, not the line (``f_lineno`` scans the code's line
table from its start, 1.4 µs at line 300 of a function); ``SourceTable`` finds the line, once per site."""


def is_internal(filename: str) -> bool:
    """Whether a frame of this file is torch's or the capture's own (the bundled models' are user code)."""
    return filename.startswith(_INTERNAL) and not filename.startswith(_USER)


def user_site(skip: int = 1) -> Site | None:
    """The ``Site`` of the innermost frame outside torch and dispatchtrace, or ``None``."""
    frame = sys._getframe(skip)
    internal = _internal_files
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name in internal:  # a set test, not a call: most frames walked are torch's own
            frame = frame.f_back
            continue
        if name not in _user_files:
            if name.startswith(_INTERNAL) and not name.startswith(_USER):
                internal.add(name)
                frame = frame.f_back
                continue
            _user_files.add(name)
        key = id(code)
        if key not in _user_code:
            _user_code[key] = code
        return key, frame.f_lasti
    return None


_sources: dict[Site, Source] = {}
"""The ``Source`` of every site resolved so far: a site's code is held in ``_user_code`` (its id never
reused), so its line and text are the same in every capture, found once per process."""


class SourceTable:
    """Turns recorded sites into ``Source`` records, one per distinct site (kept for the process)."""

    def resolve(self, site: Site | None) -> Source | None:
        if site is None:
            return None
        src = _sources.get(site)
        if src is None:
            key, lasti = site
            code = _user_code[key]
            line = _line(code, lasti)
            text = linecache.getline(code.co_filename, line).strip() if line is not None else ""
            src = _sources[site] = Source(code.co_filename, line, code.co_qualname, text)
        return src

    def assign(self, records: Sequence[Any], sites: list[Site | None]) -> None:
        """``record.source = resolve(site)`` for each record and its site, in one pass over a capture's ops or calls."""
        get = _sources.get
        for record, site in zip(records, sites, strict=True):
            if site is not None:
                src = get(site)
                record.source = src if src is not None else self.resolve(site)


def _line(code: CodeType, lasti: int) -> int | None:
    """The line of the instruction at byte offset ``lasti`` of ``code``: what ``frame.f_lineno`` says there.

    >>> import sys
    >>> def here():
    ...     frame = sys._getframe()
    ...     return frame.f_lineno, _line(frame.f_code, frame.f_lasti)
    >>> a, b = here(); a == b
    True
    """
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None
