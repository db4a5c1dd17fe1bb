"""dispatchtrace vs torchlens on the same forward, in one process (torchlens is benchmark-only).

Run: .venv/bin/pip install torchlens && .venv/bin/python benchmarks/vs_torchlens.py [--repeat 5]
torch.set_num_threads(1); medians; plain forward timed before and after torchlens (it wraps torch
functions while it logs; unwrap_when_done=True restores them).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import torch
import torchvision

import dispatchtrace as dt


def _median(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=["resnet18", "resnet50"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    # dispatchtrace first, before torchlens is even imported (importing it changes torch's state)
    models = {name: torchvision.models.get_model(name, weights=None).eval() for name in args.models}
    x = torch.randn(1, 3, 224, 224)
    before: dict[str, tuple[float, float]] = {}
    for name, model in models.items():
        def capture(model: torch.nn.Module = model) -> None:
            with dt.capture(model):
                model(x)

        with torch.no_grad():
            before[name] = (_median(lambda: model(x), args.repeat), _median(capture, args.repeat))

    import torchlens as tl
    from torchlens.options import CaptureOptions

    version = getattr(tl, "__version__", "?")
    print(f"torch {torch.__version__}, torchlens {version}, threads 1, median of {args.repeat}\n")
    print("| model | plain ms | dispatchtrace | torchlens, save=None | torchlens, default (save all) |")
    print("|---|---:|---:|---:|---:|")
    for name, model in models.items():
        plain, ours = before[name]
        opts = CaptureOptions(unwrap_when_done=True)
        lens_meta = _median(lambda: tl.trace(model, x, save=None, capture=opts), args.repeat)
        lens_all = _median(lambda: tl.trace(model, x, capture=opts), args.repeat)
        with torch.no_grad():
            plain_after = _median(lambda: model(x), args.repeat)
        base = min(plain, plain_after)
        print(f"| {name} | {base * 1e3:.1f} | {ours / base:.2f}x | {lens_meta / base:.2f}x | {lens_all / base:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()
