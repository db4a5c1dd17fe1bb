"""What the commands share: the ``--depth`` parser, ``-o`` (through the format registry), the forward-error message."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..depth import Depth, check_depth
from ..errors import one_line
from .errors import CliError

if TYPE_CHECKING:
    from ..graph import Graph


def parse_depth(text: str) -> Depth:
    """``--depth N|auto|ops|all`` (see ``dispatchtrace.depth``), else an argparse error naming the accepted values.

    >>> parse_depth("2"), parse_depth("auto")
    (2, 'auto')
    """
    value: object = int(text) if text.strip().lstrip("-").isdigit() else text.strip()
    try:
        return check_depth(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N (a whole number >= 0), auto, ops or all; got {text!r}") from None


def add_model_arguments(p: argparse.ArgumentParser, *, device_help: str) -> None:
    """MODEL, --input, --dtype and --device: how the commands that build a model are told which."""
    p.add_argument("model", metavar="MODEL",
                   help="torchvision model name (resnet50; weights=None), coolcnn, package.module:factory, or path/to/file.py:Name")
    p.add_argument("-i", "--input", action="append", default=[], metavar="SHAPE",
                   help="input shape such as 1x3x224x224; repeat for several inputs (default: the model's input_shape, else 1x3x224x224)")
    p.add_argument("--dtype", default="float32", help="input dtype (default float32; integer dtypes give small random ints)")
    p.add_argument("--device", default="cpu", choices=["cpu", "meta", "cuda"], help=device_help)


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    """-o FILE (repeatable) and --tree: what the commands that write files share."""
    from ..render.formats import help_text

    p.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                   help=f"write FILE; the format comes from the suffix: {help_text()}; repeatable")
    p.add_argument("--tree", action="store_true", help="print the tree even when writing files")


def check_outputs(paths: Sequence[str]) -> None:
    """Refuse a file whose suffix no registered format has, before any work is done."""
    from ..render.formats import for_path, suffixes

    for out in paths:
        if for_path(out) is None:
            raise CliError(f"cannot tell the format of {out!r} from its suffix; use one of: {' '.join(suffixes())}")


def write_output(graph: Graph, path: str | Path, *, depth: Depth = "auto", ops: bool = False, noise: bool = False,
                 at: str | None = None, statements: bool = False) -> Path:
    """``graph.render(path, ...)`` for ``-o``; an unknown ``at`` label or a ``dot`` failure is a ``CliError``
    (their messages already say what to do)."""
    from ..render.errors import DotFailedError, DotNotFoundError
    from ..render.estimate import DiagramTooLargeError

    try:
        return graph.render(path, depth=depth, ops=ops, noise=noise, at=at, statements=statements)
    except (DotNotFoundError, DotFailedError, DiagramTooLargeError) as e:
        raise CliError(str(e)) from e
    except (ValueError, KeyError) as e:
        raise CliError(str(e.args[0]) if e.args else str(e)) from e


def forward_error(name: str, inputs: Sequence[Any], error: Exception) -> CliError:
    """The one line for a forward pass that raised: the model, the input shapes, the error's first line."""
    shapes = ", ".join("x".join(str(s) for s in t.shape) for t in inputs)
    return CliError(f"the forward pass of {name} on input {shapes} raised {one_line(error)}"
                    " (check --input and --dtype)")
