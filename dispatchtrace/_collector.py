"""The cyclic garbage collector paused while a capture builds a graph, or a graph is written or read.

A graph is many small long-lived objects (ops point at their call, producers and users): full
collections during the build would walk all of them again and again, costing more with every op.
``Paused`` turns the collector off and puts back the state it found, on every way out (an error,
``KeyboardInterrupt``); objects freed by reference counting are freed as usual meanwhile.

>>> import gc
>>> with Paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import gc
from types import TracebackType


class Paused:
    """``with Paused():`` (or ``start()`` then ``stop()``): the collector off inside, as it was after."""

    __slots__ = ("_was",)

    def __init__(self) -> None:
        self._was: bool | None = None

    def start(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def stop(self) -> None:
        """Back to the state ``start`` found; a second call does nothing."""
        was, self._was = self._was, None
        if was:
            gc.enable()

    def __enter__(self) -> Paused:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
