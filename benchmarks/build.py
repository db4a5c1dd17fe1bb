"""How long ``dt.models.build`` takes for default configs by name, on meta (no weight memory) and, when small, on CPU.

Run: .venv/bin/python benchmarks/build.py [--repeat 3] [SPEC ...]
(default: hf:llama hf:mistral hf:gpt2 hf:t5 hf:whisper timm:vit_giant_patch14_224 timm:convnext_tiny)

Per spec: the parameter count (``dt.models.size``), then the best of ``--repeat`` builds on meta and of a
capture of one forward there (``dispatchtrace SPEC --device meta``), after one warm-up that pays the
imports of the model's module; then the first build in a fresh process, imports included. Numbers go into docs/benchmarks.md ("Models by name").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import torch

import dispatchtrace as dt
from dispatchtrace._text import human

FRESH = """import sys, time
start = time.perf_counter()
import dispatchtrace as dt
dt.models.build(sys.argv[1], device="meta")
print(time.perf_counter() - start)"""
DEFAULT = ["hf:llama", "hf:mistral", "hf:gpt2", "hf:t5", "hf:whisper", "timm:vit_giant_patch14_224", "timm:convnext_tiny"]


def best(repeat: int, run: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("specs", nargs="*", default=DEFAULT)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"{'spec':<30} {'class':<34} {'params':>8} {'build on meta':>14} {'capture on meta':>16} {'fresh process':>16}")
    for spec in args.specs:
        size = dt.models.size(spec)
        model, a, k = dt.models.build(spec, device="meta")  # warm-up: imports

        def capture(model: torch.nn.Module = model, a: tuple = a, k: dict = k) -> None:
            with torch.no_grad(), dt.capture(model):
                model(*a, **k)

        build_s = best(args.repeat, lambda spec=spec: dt.models.build(spec, device="meta"))
        capture_s = best(args.repeat, capture)
        fresh = subprocess.run([sys.executable, "-c", FRESH, spec], capture_output=True, text=True, check=True)
        print(f"{spec:<30} {size.cls:<34} {human(size.params):>8} "
              f"{build_s:>12.2f} s {capture_s:>14.2f} s {float(fresh.stdout):>14.2f} s")


if __name__ == "__main__":
    main()
