"""What the commands share: the ``--depth`` parser, the output-suffix check, the forward-error message."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import CliError


def parse_depth(text: str) -> int:
    """``--depth N``: a whole number >= 0, else an argparse error.

    >>> parse_depth("2")
    2
    """
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {n}")
    return n


def check_outputs(paths: Sequence[str]) -> None:
    """Refuse unknown suffixes before any work is done."""
    from ..render.files import SUFFIXES

    for out in paths:
        if Path(out).suffix.lower() not in SUFFIXES:
            raise CliError(f"cannot tell the format of {out!r} from its suffix; use one of: {' '.join(SUFFIXES)}")


def forward_error(name: str, inputs: Sequence[Any], error: Exception) -> CliError:
    """The one line for a forward pass that raised: the model, the input shapes, the error's first line."""
    shapes = ", ".join("x".join(str(s) for s in t.shape) for t in inputs)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return CliError(f"the forward pass of {name} on input {shapes} raised {type(error).__name__}: {text}"
                    " (check --input and --dtype)")
