"""``dispatchtrace calibrate [-o spec.json]``: measure the device at hand into a DeviceSpec (or show a spec)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ..errors import SpecError
from ..hardware import DeviceSpec, spec_of
from ._errors import ArgumentParser, CliError


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace calibrate",
        description="Measure this machine's CPU or GPU: matmul FLOP/s per dtype, convolutions, attention, "
        "memory-bound kernels (elementwise, copies, reductions) at several sizes, and the per-op overhead. "
        "Prints the device spec they make (dense peaks, bandwidth, overhead, efficiency by op class and size) "
        "and writes it as JSON with -o, for g.estimate(path) and --estimate PATH. CUDA events time a GPU, the "
        "wall clock the CPU. About 9 s on a CPU at one thread (--quick: about 3 s).",
        examples=["dispatchtrace calibrate -o cpu.json --threads 1",
                  "dispatchtrace calibrate --device cuda -o gpu.json",
                  "dispatchtrace calibrate --show h100", "dispatchtrace calibrate --show cpu.json"],
    )
    p.add_argument("-o", "--output", metavar="PATH", help="write the spec to PATH (.json)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when torch sees one, else cpu)")
    p.add_argument("--threads", type=_positive, default=None, metavar="N",
                   help=f"CPU threads while measuring (default: torch's current number, here {torch.get_num_threads()})")
    p.add_argument("--quick", action="store_true", help="fewer sizes and timings: a rougher spec in a few seconds")
    p.add_argument("--repeat", type=_positive, default=None, metavar="N",
                   help="timings per size, the least counts (default 3 on the CPU, 5 on CUDA; --quick: 2, 3)")
    p.add_argument("--name", default=None, help="the spec's name (default: HOST-cpu or HOST-cuda)")
    p.add_argument("--show", metavar="SPEC", default=None,
                   help="measure nothing: print SPEC (a built-in name such as h100, or a spec JSON) and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per measured kernel on stderr")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.output is not None and Path(args.output).suffix.lower() != ".json":
        raise CliError(f"-o {args.output}: a device spec is written as .json (for example -o spec.json)")
    if args.output is not None and not Path(args.output).resolve().parent.is_dir():
        raise CliError(f"-o {args.output}: the folder {Path(args.output).parent} does not exist")
    try:
        if args.show is not None:
            if any(v is not None for v in (args.device, args.threads, args.repeat, args.name)) or args.quick:
                raise CliError("--show prints a spec without measuring: drop --device, --threads, --quick, "
                               "--repeat and --name")
            spec = spec_of(args.show)
        else:
            log = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
            start = time.perf_counter()
            spec = DeviceSpec.calibrate(args.device, threads=args.threads, quick=args.quick, repeat=args.repeat,
                                        name=args.name, log=log)
            if not args.quiet:
                print(f"calibrate: measured in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    except SpecError as e:
        raise CliError(str(e)) from None
    if args.output is not None:
        spec.save(args.output)  # before printing: a closed stdout (| head) loses no measurement
    print(spec)
    if args.output is not None:
        print(f"\nwrote {args.output}")
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number >= 1, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number >= 1, not {text!r}")
    return value
