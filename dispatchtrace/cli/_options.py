"""What the commands share: the model options, the view options (``--depth``, ``--at``, ...), ``-o``, the forward-error message."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._text import one_line
from ..errors import DiagramTooLargeError, DotFailedError, DotNotFoundError, SpecError
from ..graph import Depth, check_depth
from ..hardware import DeviceSpec, spec_of
from ..render import for_path, help_text, option_names, suffixes
from ._errors import CliError
from ._models import parse_dtype, parse_shape

if TYPE_CHECKING:
    from ..graph import Graph, PhaseView
    from ..views import Tree


def parse_depth(text: str) -> Depth:
    """``--depth N|auto|ops|all`` (see ``graph/_depth.py``), else an argparse error naming the accepted values.

    >>> parse_depth("2"), parse_depth("auto")
    (2, 'auto')
    """
    value: object = int(text) if text.strip().lstrip("-").isdigit() else text.strip()
    try:
        return check_depth(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N (a whole number >= 0), auto, ops or all; got {text!r}") from None


def add_model_arguments(p: argparse.ArgumentParser, *, device_help: str) -> None:
    """MODEL, --input, --dtype, --device and --seed: how the commands that build a model are told which."""
    p.add_argument("model", metavar="MODEL",
                   help="torchvision model name (resnet50; weights=None), coolcnn, hf:TYPE (a transformers model type "
                   "from its default config: hf:gpt2, hf:llama, hf:t5), timm:NAME (timm:convnext_tiny), "
                   "package.module:factory, or path/to/file.py:Name; nothing is downloaded")
    p.add_argument("-i", "--input", action="append", type=parse_shape, default=[], metavar="SHAPE",
                   help="input shape: sizes >= 1 joined by x, such as 1x3x224x224; repeat for several inputs "
                   "(default: an hf: model's inputs from its config, a timm: model's image size, else the model's "
                   "input_shape, else 1x3x224x224)")
    p.add_argument("--dtype", type=parse_dtype, default="float32", metavar="DTYPE",
                   help="float32 (default), float16, bfloat16, int64, ...: a float dtype casts the inputs and the "
                   "model's floating-point parameters and buffers; an integer or bool dtype gives random 0/1 inputs "
                   "(token ids) and leaves the model as it is")
    p.add_argument("--device", default="cpu", choices=["cpu", "meta", "cuda"], help=device_help)
    p.add_argument("--seed", type=int, default=0, metavar="N",
                   help="seed for the model's initial weights and the random inputs (default 0)")


def add_view_arguments(p: argparse.ArgumentParser, *, summary: bool = False) -> None:
    """--depth, --ops, --noise, --at, --statements, --metrics and --phase: what the tree (and each ``-o`` file) shows."""
    p.add_argument("--depth", type=parse_depth, default=None, metavar="N|auto|ops|all",
                   help="open module calls down to depth N (the model's call is 0); auto: a readable depth; ops: every op; "
                   f"all: every call (see docs/cli.md); default: all for the tree{' and summary' if summary else ''}, "
                   "auto for diagrams")
    p.add_argument("--ops", action="store_true", help="also list the ATen ops inside the calls shown")
    p.add_argument("--noise", action="store_true",
                   help="show the bookkeeping ops nothing reads (autograd's detach, batch-norm counters), hidden by default")
    p.add_argument("--at", metavar="CALL", default=None,
                   help="start the tree at this module call, named by its label as the tree prints it (layer1.0, "
                   "layer1.0.relu#2); --depth counts from it")
    p.add_argument("--statements", action="store_true",
                   help="group the items of each call under the source line that issued them (main_path = self.pool(...))")
    p.add_argument("--metrics", nargs="+", default=None, metavar="NAME",
                   help="write these metrics on each line of the tree: time, est_time, flops, ... (the names of "
                   "dt.views.metrics(g), docs/cli.md); a time metric needs --time, an estimate's --estimate")
    p.add_argument("--phase", choices=["forward", "backward", "all"], default="forward",
                   help="of a training step: the forward ops (default), the backward ops under the forward call they "
                   "belong to, or both (docs/training.md)")


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    """-o FILE (repeatable) and --tree: what the commands that write files share."""
    p.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                   help=f"write FILE; the format comes from the suffix: {help_text()}; repeatable")
    p.add_argument("--tree", action="store_true", help="print the tree even when writing files")
    p.add_argument("--force", action="store_true",
                   help="draw a .svg, .pdf or .png even when dot would take over a minute to lay it out")


def add_estimate_arguments(p: argparse.ArgumentParser) -> None:
    """--estimate SPEC and --ranks-per-node N: what the commands that estimate share (docs/time.md, timeline.md)."""
    p.add_argument("--estimate", metavar="SPEC",
                   help="print how long each call would take on a device: a built-in name (h100, a100-80gb, ...) or "
                   "a JSON spec from `dispatchtrace calibrate -o spec.json` (docs/time.md); -o step.trace.json and "
                   "-o step.et write its timeline")
    p.add_argument("--ranks-per-node", type=int, metavar="N",
                   help="with --estimate: how many ranks share a node, which places each collective's group on the "
                   "spec's intra-node or inter-node link (default: the spec's, 8 for the built-in GPUs; docs/timeline.md)")


def spec_from(args: argparse.Namespace) -> DeviceSpec | None:
    """``--estimate``'s spec, read before any work: an unknown name or a bad file is one line, as is a
    ``--ranks-per-node`` without ``--estimate`` or below 1."""
    spec = None
    if args.estimate is not None:
        try:
            spec = spec_of(args.estimate)
        except SpecError as e:
            raise CliError(f"--estimate: {e}") from None
    if args.ranks_per_node is not None and (spec is None or args.ranks_per_node < 1):
        raise CliError("--ranks-per-node takes a whole number >= 1 and goes with --estimate SPEC")
    return spec


def check_outputs(paths: Sequence[str]) -> None:
    """Refuse a file whose suffix no registered format has, before any work is done."""
    for out in paths:
        if out.endswith(("/", os.sep)):
            raise CliError(f"-o {out} ends with a slash, so it names a folder; name the file: -o {out}model.svg")
        if for_path(out) is None:
            raise CliError(f"cannot tell the format of {out!r} from its suffix; use one of: {' '.join(suffixes())}")


def tree_of(graph: Graph, depth: Depth | None, *, ops: bool = False, noise: bool = False, at: str | None = None,
            statements: bool = False, phase: PhaseView = "forward", metrics: Sequence[str] | None = None) -> Tree:
    """``graph.tree(...)`` (``depth`` not given: ``"all"``) with an unknown or ambiguous ``at`` label, or a metric
    that is unknown or does not apply, as a ``CliError``."""
    try:
        return graph.tree("all" if depth is None else depth, ops=ops, noise=noise, at=at, statements=statements,
                          phase=phase, metrics=metrics or ())
    except (ValueError, KeyError) as e:
        raise CliError(str(e.args[0]) if e.args else str(e)) from e


VIEW_OPTIONS = ("depth", "ops", "noise", "at", "statements", "metrics", "phase")
"""The view options (``add_view_arguments``): what the printed tree takes, and each ``-o`` format as far
as its options class declares them (``render/_formats.py``)."""
SUMMARY_OPTIONS = ("depth", "phase")
"""What the printed summary takes of them."""


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The view options the command line gave, at other values than their defaults.

    >>> given_options(argparse.Namespace(depth=None, ops=True, noise=False, at=None, statements=False, phase="forward"))
    {'ops': True}
    """
    values = {k: getattr(args, k, None) for k in (*VIEW_OPTIONS, "force")}
    return {k: v for k, v in values.items() if v not in (None, False) and not (k == "phase" and v == "forward")}


def output_options(path: str | Path, given: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The options one ``-o`` file is written with, and the given ones its format does not take.

    A diagram or page given ``--ops`` and no ``--depth`` draws every op (``depth="ops"``).

    >>> output_options("x.svg", {"ops": True, "at": "layer1"})
    ({'depth': 'ops'}, ['at'])
    >>> output_options("x.json", {"depth": 2, "phase": "all"})
    ({}, ['depth', 'phase'])
    >>> output_options("x.png", {"force": True}), output_options("x.dot", {"force": True})
    (({'force': True}, []), ({}, ['force']))
    """
    fmt = for_path(path)
    names = option_names(fmt) if fmt is not None else ()
    options = {k: v for k, v in given.items() if k in names}
    unused = [k for k in given if k not in names]
    if "ops" in unused and "depth" in names and "depth" not in given:
        options["depth"] = "ops"
        unused.remove("ops")
    return options, unused


def check_options(args: argparse.Namespace, *, tree: bool, summary: bool = False) -> None:
    """Before any work: a view option that neither what is printed (the tree, the summary) nor any ``-o``
    file takes is a ``CliError`` (nothing the command line is given is ignored in silence)."""
    given = given_options(args)
    taken = set(VIEW_OPTIONS if tree else SUMMARY_OPTIONS if summary else ())
    for out in args.output:
        options, unused = output_options(out, given)
        taken |= set(given) - set(unused)
    idle = [f"--{k}" for k in given if k not in taken]
    if idle:
        them = "them" if len(idle) > 1 else "it"
        files = ", ".join(args.output)
        shown = "the summary" if summary else "nothing printed"
        raise CliError(f"{' and '.join(idle)} would change nothing: {shown} and none of {files} uses {them} "
                       "(--at, --ops, --statements and --metrics shape the tree: add --tree or -o FILE.txt; .json holds the whole "
                       "capture)")


def write_output(graph: Graph, path: str | Path, **options: Any) -> Path:
    """``graph.render(path, **options)`` for one ``-o`` file; an unknown ``at`` label or a ``dot`` failure is a
    ``CliError`` (their messages already say what to do)."""
    try:
        return graph.render(path, **options)
    except DiagramTooLargeError as e:
        raise CliError(f"{path} not written: dot would take about {e.seconds:.0f} s to lay it out (the limit is a "
                       "minute); draw a smaller depth (--depth 2), write the .txt tree, or add --force to draw it "
                       "anyway") from e
    except (DotNotFoundError, DotFailedError) as e:
        raise CliError(str(e)) from e
    except (ValueError, KeyError) as e:
        raise CliError(str(e.args[0]) if e.args else str(e)) from e
    except (FileExistsError, NotADirectoryError) as e:  # a folder on the way is a file
        raise CliError(f"cannot write {path}: {e.filename} is a file, not a folder") from e
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from e


def write_outputs(graph: Graph, args: argparse.Namespace, *, stdout: bool = True) -> None:
    """Write each ``-o`` file with the view options in ``args`` that its format takes, reporting ``wrote FILE``
    (on stderr when ``stdout`` is false, so it stays free for the tree) and a note for the given options a
    file does not use (``check_options`` has refused those no output uses). A diagram ``dot`` would take too
    long to lay out is refused with its own line and the others are still written; then a ``CliError``
    names the ones refused."""
    given = given_options(args)
    refused: list[str] = []
    for out in args.output:
        options, unused = output_options(out, given)
        try:
            write_output(graph, out, **options)
        except CliError as e:
            if not isinstance(e.__cause__, DiagramTooLargeError) or len(args.output) == 1:
                raise
            print(f"dispatchtrace: error: {e}", file=sys.stderr)
            refused.append(out)
            continue
        print(f"wrote {out}", file=sys.stdout if stdout else sys.stderr)
        if unused:
            them = "them" if len(unused) > 1 else "it"
            print(f"dispatchtrace: note: {out} does not use {' and '.join(f'--{k}' for k in unused)}; the other "
                  f"outputs take {them}", file=sys.stderr)
    if refused:
        them = "it" if len(refused) == 1 else "them"
        raise CliError(f"not written: {', '.join(refused)}, too large for dot (the other outputs were written); "
                       f"--force draws {them} anyway")


def forward_error(name: str, inputs: Sequence[Any], error: Exception) -> CliError:
    """The one line for a forward pass that raised: the model, the input shapes, the error's first line."""
    shapes = ", ".join("x".join(str(s) for s in t.shape) for t in inputs)
    ints = any(not (t.dtype.is_floating_point or t.dtype.is_complex) for t in inputs)
    hint = "; an integer --dtype gives token ids, for models that take them" if ints else ""
    checks = "--config, which sets its shapes, then --input and --dtype" if name.startswith(("hf:", "timm:")) else "--input and --dtype"
    return CliError(f"the forward pass of {name} on input {shapes} raised {one_line(error)}"
                    f" (check {checks}{hint})")
