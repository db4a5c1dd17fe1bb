"""``--config``, ``--task``, ``--seq``: the catalogue options, and the one way the commands build MODEL and its inputs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..models import TASKS, Built, Size, check_budget, parse_config, size
from ._errors import CliError
from ._models import build_model, parse_inputs


def add_catalogue_arguments(p: argparse.ArgumentParser) -> None:
    """--config KEY=VALUE ..., --task and --seq: how an ``hf:`` or ``timm:`` model is configured and fed."""
    p.add_argument("--config", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="config overrides for hf: models (num_hidden_layers=2 hidden_size=256), keyword arguments "
                   "for timm: and torchvision models (img_size=64, image_size=64); values read as Python literals; "
                   "it takes every KEY=VALUE that follows, so write it after MODEL")
    p.add_argument("--task", choices=TASKS, default=None,
                   help="which class an hf: model type is built as (default: the first of seq2seq, masked-lm, "
                   "causal-lm, base the type has)")
    p.add_argument("--seq", type=_positive, default=None, metavar="N",
                   help="length of the token ids of an hf: text model (default 16, at most its positions)")


def build_from(args: argparse.Namespace, *, log: Any = None) -> Built:
    """The model and its example inputs for parsed ``args``: ``--input`` replaces the model's own inputs.

    An ``hf:`` or ``timm:`` model's size is reported on stderr first (``log``); on the CPU one above
    the memory budget is refused before it is built.
    """
    log = log or (lambda line: print(line, file=sys.stderr))
    try:
        config = parse_config(args.config)
    except ValueError as e:
        raise CliError(str(e)) from e
    spec = args.model
    catalogued = spec.startswith(("hf:", "timm:"))
    if catalogued and args.device == "cpu":
        try:
            found = size(spec, config=config, task=args.task, dtype=args.dtype)
            log(f"dispatchtrace: {found}")
            check_budget(found)
        except ValueError as e:
            raise CliError(str(e)) from e
    built = build_model(spec, config=config, task=args.task, seq=args.seq, device=args.device, dtype=args.dtype,
                        max_bytes=float("inf"))
    if catalogued and args.device != "cpu":
        log(f"dispatchtrace: {Size.of(built.model, spec, args.dtype)}")
    if args.input:
        return Built(built.model, tuple(parse_inputs(args.input, dtype=args.dtype, device=args.device)), {})
    return built


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)
