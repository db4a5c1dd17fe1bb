"""``dispatchtrace MODEL``: capture one forward pass (or, ``--train``, one training step), print its tree or write diagrams."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from .._version import __version__
from ..errors import NoValuesError
from ..graph import Graph
from ..recording import EXTRAS, Extra, Values, capture
from ..views import has_backward, seconds
from ._build import add_catalogue_arguments, build_from
from ._errors import ArgumentParser, CliError
from ._options import (
    add_estimate_arguments,
    add_model_arguments,
    add_output_arguments,
    add_view_arguments,
    check_options,
    check_outputs,
    forward_error,
    spec_from,
    tree_of,
    write_outputs,
)


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace",
        description="Capture every ATen op of one forward pass and show it as a tree of module calls "
        "with parallel branches, or write diagrams. Other commands: `dispatchtrace demo [DIR]`, "
        "`dispatchtrace render`, `dispatchtrace verify`, `dispatchtrace mismatch`, `dispatchtrace diff`.",
        examples=["dispatchtrace resnet50 --depth 2", "dispatchtrace coolcnn -o cool.svg -o cool.pdf",
                  "dispatchtrace hf:gpt2 --config n_layer=2 --depth 2", "dispatchtrace hf:llama --device meta --depth 1",
                  "dispatchtrace hf:t5 --config num_layers=2 --summary --depth 1", "dispatchtrace timm:convnext_atto --depth 1",
                  "dispatchtrace resnet18 --at layer1.0 --ops", "dispatchtrace resnet18 --dtype bfloat16 --device meta",
                  "dispatchtrace coolcnn -o trace.json", "dispatchtrace coolcnn --train --phase backward --summary",
                  "dispatchtrace coolcnn --train --values stats", "dispatchtrace resnet50 --time --depth 1",
                  "dispatchtrace mypkg.nets:make_net --input 8x128 --dtype int64", "dispatchtrace ./nets.py:Net --input 2x16"],
    )
    add_model_arguments(p, device_help="where the model and inputs live; meta runs with no data and no weight memory")
    add_catalogue_arguments(p)
    add_view_arguments(p)
    add_output_arguments(p)
    p.add_argument("--train", action="store_true",
                   help="capture a training step instead: forward, a loss (cross-entropy against class 0 for a 2-D "
                   "output, else the mean square of the output), backward and an SGD step (docs/training.md)")
    p.add_argument("--summary", action="store_true", help="print the summary table instead of the tree")
    p.add_argument("--values", choices=["none", "stats"], default="none",
                   help="stats: record the statistics of every op's results (saved with -o trace.json) and print "
                   "the op that first made a NaN or Inf, if one did (docs/numerics.md)")
    p.add_argument("--stats", nargs="+", choices=EXTRAS, default=[], metavar="EXTRA",
                   help="with --values stats, what to take beside the default statistics (NaN/Inf counts, min, max, "
                   f"norm): {', '.join(EXTRAS)} (the mean, exact zero counts, a bitwise fingerprint; docs/numerics.md)")
    p.add_argument("--time", action="store_true",
                   help="measure each op's time (capture(timing=True)) after one warm-up forward run uncaptured, and "
                   "print the summary with each call's measured time, own time and share, then the total (docs/time.md)")
    add_estimate_arguments(p)
    p.add_argument("--version", action="version", version=f"dispatchtrace {__version__}")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    check_outputs(args.output)
    summary = args.summary or (args.time and not args.output and not args.tree)  # --time: the times are the summary's
    check_options(args, tree=(not args.output and not summary) or args.tree, summary=summary)
    if args.stats and args.values != "stats":
        raise CliError(f"--stats {' '.join(args.stats)} adds to the statistics of --values stats: add --values stats")
    spec = spec_from(args)
    torch.manual_seed(args.seed)
    model, inputs, kwargs = build_from(args)
    if args.time:
        warm_up(model, inputs, kwargs, name=args.model, train=args.train)
        print("dispatchtrace: --time: one warm-up forward ran uncaptured first, so one-time costs (allocations, "
              "kernel choice, lazy init) stay out of the measured times", file=sys.stderr)
    step = train_step if args.train else trace
    graph = step(model, inputs, kwargs, name=args.model, values=args.values, stats=args.stats, timing=args.time)
    if args.phase == "backward" and not has_backward(graph):
        raise CliError("--phase backward: there is no backward phase in this capture; add --train to capture a training step")
    if graph.notes:  # what the capture could not see (a scripted module's calls): one line
        print("dispatchtrace: note: " + " ".join(graph.notes), file=sys.stderr)
    estimate = graph.estimate(spec, ranks_per_node=args.ranks_per_node) if spec is not None else None  # the views show it
    if summary:
        print(graph.summary("all" if args.depth is None else args.depth, phase=args.phase))
    if (not args.output and not summary) or args.tree:
        print(tree_of(graph, args.depth, ops=args.ops, noise=args.noise, at=args.at, statements=args.statements,
                      phase=args.phase, metrics=args.metrics))
    write_outputs(graph, args, stdout=not (args.tree or summary))
    if estimate is not None:
        print(estimate)
    if args.values == "stats":
        _nonfinite(graph)
    if args.time and graph.time is not None:
        print(time_line(graph))
    return 0


def time_line(graph: Graph) -> str:
    """``measured time: 41.2 ms (forward 12.0 ms, backward 25.1 ms, optimizer 4.1 ms)``: the total, then per phase
    on a training step."""
    phases = graph.phase_times
    parts = f" ({', '.join(f'{p} {seconds(t)}' for p, t in phases.items())})" if len(phases) > 1 else ""
    return f"measured time: {seconds(graph.time)}{parts}"


def warm_up(model: torch.nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *,
            name: str = "the model", train: bool = False) -> None:
    """``--time``'s warm-up, uncaptured: one forward under ``torch.no_grad()``, or (``train``) a forward, ``loss_of``
    and backward, the gradients then dropped (no optimizer step: the weights the capture sees are unchanged)."""
    try:
        if train:
            model.train()
            loss_of(model(*inputs, **(kwargs or {}))).backward()
            model.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                model(*inputs, **(kwargs or {}))
    except Exception as e:
        raise forward_error(name, tensors(inputs, kwargs), e) from e


def _nonfinite(graph: Graph) -> None:
    """The op that first made a NaN or Inf, when one did; a note when the capture has no values (meta)."""
    try:
        found = graph.first_nonfinite()
    except NoValuesError as e:
        print(f"dispatchtrace: note: {e}", file=sys.stderr)
        return
    print(found if found is not None else f"no NaN or Inf: every value of the {len(graph.ops)} ops is finite")


def trace(model: torch.nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *,
          name: str = "the model", values: Values = "none", stats: Sequence[Extra] = (), timing: bool = False) -> Graph:
    """One captured forward pass ``model(*inputs, **kwargs)`` under ``torch.no_grad()`` (``stats``: the extras of
    ``values="stats"``; ``timing``: each op timed); a forward that raises becomes a ``CliError``."""
    try:
        with torch.no_grad(), capture(model, values=values, stats=stats, timing=timing) as graph:
            model(*inputs, **(kwargs or {}))
    except Exception as e:
        raise forward_error(name, tensors(inputs, kwargs), e) from e
    return graph


def tensors(inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> list[torch.Tensor]:
    """The tensors among the positional and keyword inputs, in order (what a forward error names)."""
    return [t for t in (*inputs, *(kwargs or {}).values()) if isinstance(t, torch.Tensor)]


def loss_of(output: object) -> torch.Tensor:
    """The ``--train`` loss: cross-entropy against class 0 for a 2-D float output (logits), else the mean
    square of the (first) float output."""
    out = output[0] if isinstance(output, (tuple, list)) else getattr(output, "logits", output)
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise TypeError(f"--train needs a floating-point tensor output to make a loss from, not {type(out).__name__}")
    if out.dim() == 2:
        return F.cross_entropy(out.float(), torch.zeros(out.shape[0], dtype=torch.int64, device=out.device))
    return out.float().pow(2).mean()


def train_step(model: torch.nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *,
               name: str = "the model", values: Values = "none", stats: Sequence[Extra] = (),
               timing: bool = False) -> Graph:
    """One captured training step: forward, ``loss_of``, backward and ``torch.optim.SGD``'s step (the model in
    train mode; ``timing``: each op timed); a step that raises becomes a ``CliError``."""
    model.train()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
    try:
        with capture(model, values=values, stats=stats, timing=timing) as graph:
            loss_of(model(*inputs, **(kwargs or {}))).backward()
            opt.step()
            opt.zero_grad()
    except Exception as e:
        raise forward_error(name, tensors(inputs, kwargs), e) from e
    return graph
