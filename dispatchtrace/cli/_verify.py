"""``dispatchtrace verify MODEL``: capture one forward, replay it as ATen ops, print the comparison."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import torch

from ..replay import verify
from ._build import add_catalogue_arguments, build_from
from ._errors import ArgumentParser
from ._options import add_model_arguments, forward_error
from ._trace import tensors


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace verify",
        description="Capture one forward pass (under torch.no_grad), rebuild it as a torch.fx graph of the "
        "captured ATen ops, run that on the same inputs and compare. Exit status 0 when the replay reproduces "
        "every output, 1 when it does not (the report names the first op that differs).",
        examples=["dispatchtrace verify resnet50 --input 1x3x224x224", "dispatchtrace verify coolcnn",
                  "dispatchtrace verify resnet18 --dtype bfloat16 --device meta"],
    )
    add_model_arguments(p, device_help="where the model and inputs live; on meta only shapes, dtypes and strides are compared")
    add_catalogue_arguments(p)
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    torch.manual_seed(args.seed)
    model, inputs, kwargs = build_from(args)
    try:
        with torch.no_grad():
            report = verify(model, *inputs, **kwargs)
    except Exception as e:
        raise forward_error(args.model, tensors(inputs, kwargs), e) from e
    print(dataclasses.replace(report, model=args.model))
    return 0 if report else 1
