"""Runs the model zoo (``benchmarks/zoo.py``, the library models included) on CPU and meta and writes ``docs/coverage.md``.

    .venv/bin/python benchmarks/coverage.py            # all models, several minutes on 2 cores
    .venv/bin/python benchmarks/coverage.py resnet vit  # only names containing these words, printed
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# measured by hand (pytest's own summary line); update it when the zoo grows
SLOW = [
    "The slow tests run in CI (`scripts/test.sh`: `pytest -m \"slow or not slow\"`, everything). Measured on",
    "the 2-core machine in this revision's tree: 1,185 fast tests (15 of them skip: 14 `cuda`, no GPU) in 2.4 min and 592 slow ones (the real gloo runs,",
    "browser pages, Model Explorer, HTA and Chakra included; 1 skips) in 13.1 min, then the fast suite on torch 2.13.0 in about 4 min (`scripts/test-torch.sh`, its own venv); CI on a clean clone of the previous revision took 20 min, set-up included. Only the",
    "library models: `pytest -m slow tests/test_zoo.py tests/views/test_views_zoo.py -k \"hf or timm or checkpoint\"`.",
    "The *capture / plain* column is timing, not a check: with few pairs or a busy machine it is noise;",
    "`docs/benchmarks.md` has the capture overhead measured on a quiet machine.",
]

LIBRARIES = [
    "Built by `dt.models.build`, the builder of `dispatchtrace hf:TYPE` and `dispatchtrace timm:NAME`, from small",
    "configs (2 layers, hidden 16-64, vocabulary 100; `timm.create_model(name, pretrained=False)` at 64x64;",
    "Hugging Face Swin at 32x32), with the builder's inputs and `HF_HUB_OFFLINE=1` set before either library is",
    "imported, so nothing comes from a hub. What these rows exercise:",
    "",
    "- **Keyword inputs** (BERT, T5, Whisper, called as `m(input_ids=, ...)`): the keyword tensors are",
    "  `g.inputs` named by their keyword, and the replay is called as the model was (`gm(input_ids=...)`).",
    "- **Literal constants** (GPT-2, Llama, Mixtral with their default cache: transformers 5.x's",
    "  `DynamicCache` builds `torch.tensor([])`; timm's Swin with `strict_img_size=False` builds its",
    "  shifted-window mask with `img_mask[:, h0:h1, w0:w1, :] = cnt`; torchvision's Swins and RAFT): their",
    "  values are kept in `g.constants`, so the replay needs nothing but the record, on a second input too.",
    "- **Calls made during backward** (`checkpoint(self.a, x, use_reentrant=False)` and GPT-2 with activation",
    "  checkpointing, `loss.backward()` inside the capture block): the recomputation adds no calls; `g.calls`",
    "  is what the forward ran, and the replay reproduces the forward's outputs.",
    "- **Train mode**: timm's efficientnet_b0 in train mode: `dt.verify` passes and leaves every BatchNorm's",
    "  `running_mean`, `running_var` and `num_batches_tracked` as they were (the zoo checks `state_dict()`).",
    "- **Meta**, the models' own limits (*unsupported*, the plain forward raises without dispatchtrace): BERT's",
    "  and checkpointed GPT-2's mask code call `Tensor.item()`; torch's meta kernel of `aten._grouped_mm`",
    "  (Mixtral's expert routing) takes only bf16/fp16; `torch.utils.checkpoint`'s backward copies out of a",
    "  meta tensor. Mixtral routes with `aten._grouped_mm` and offsets computed on tensors (no `nonzero`, no",
    "  `.item()`), so its ops do not depend on the routing and the second input applies.",
]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.1f}" if ms < 10 else f"{ms:.0f}"


def _meta(row: zoo.Row) -> str:
    if row.unsupported:
        return "unsupported"
    replay = "" if row.replay == "ok" else f", replay {row.replay}"
    return ("ok" if row.ok else "**FAILED**") + f" ({row.ops} ops{replay})"


def _mark(text: str) -> str:
    return text if text in ("ok", "-") else "**FAILED**"


def table(pairs: list[tuple[zoo.Row, zoo.Row]]) -> list[str]:
    lines = [
        "| model | library | ops | calls | calls = pre-hook | ops = empty mode | lint | replay | second input "
        "| capture / plain | plain ms | meta |",
        "|---|---|---:|---:|:-:|:-:|:-:|:-:|:-:|---:|---:|---|",
    ]
    for cpu, meta in pairs:
        name = cpu.name + (f" <br><sub>{_cell(cpu.note)}</sub>" if cpu.note else "")
        if cpu.unsupported:
            lines.append(f"| {name} | {cpu.library} | | | | | | **cannot run**: {_cell(cpu.unsupported)} | | | | "
                         f"{_meta(meta)} |")
            continue
        yes = {True: "yes", False: "**NO**"}
        lines.append(
            f"| {name} | {cpu.library} | {cpu.ops} | {cpu.calls} | {yes[cpu.calls_match]} | {yes[cpu.ops_match]} | "
            f"{_mark(cpu.lint)} | {_mark(cpu.replay)} | {_mark(cpu.second)} | {cpu.ratio:.2f} | "
            f"{_ms(cpu.plain_s)} | {_meta(meta)} |"
        )
    return lines


def notes(pairs: list[tuple[zoo.Row, zoo.Row]]) -> list[str]:
    out: list[str] = []
    for cpu, meta in pairs:
        for row in (cpu, meta):
            for problem in row.problems:
                out.append(f"- **{row.name}** on {row.device}: {_cell(problem)}")
            if row.unsupported:
                out.append(f"- {row.name} does not run on {row.device} (the plain forward raises, without "
                           f"dispatchtrace): `{_cell(row.unsupported)}`")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only models whose name contains one of these (no file written)")
    parser.add_argument("--repeat", type=int, default=3, help="time this many (plain, captured) pairs (default 3)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "coverage.md"))
    opts = parser.parse_args(argv)
    libraries = {s.name for s in zoo.specs(libraries=True)} - {s.name for s in zoo.specs()}
    specs = [s for s in zoo.specs(libraries=True) if not opts.only or any(w in s.name for w in opts.only)]
    pairs: list[tuple[zoo.Row, zoo.Row]] = []
    start = time.perf_counter()
    for spec in specs:
        t0 = time.perf_counter()
        cpu = zoo.run(spec, "cpu", repeat=opts.repeat)
        meta = zoo.run(spec, "meta")
        gc.collect()
        pairs.append((cpu, meta))
        status = "ok" if cpu.ok and meta.ok else "PROBLEM " + "; ".join(cpu.problems + meta.problems)[:300]
        print(f"{spec.name:40s} {cpu.ops:6d} ops {cpu.calls:5d} calls replay={cpu.replay:6s} "
              f"ratio={cpu.ratio:6.2f} {time.perf_counter() - t0:6.1f}s {status}", file=sys.stderr, flush=True)
    total = time.perf_counter() - start
    if opts.only:
        return 0
    failing = [c.name for c, m in pairs if not (c.ok and m.ok and (c.unsupported or c.replay == "ok"))]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    base = [(c, m) for c, m in pairs if c.name not in libraries]
    extra = [(c, m) for c, m in pairs if c.name in libraries]
    versions = ", ".join(f"{name} {_version(name)}" for name in ("transformers", "timm"))
    text = [
        "# Model-zoo coverage",
        "",
        "Generated by `.venv/bin/python benchmarks/coverage.py`; do not edit by hand (the prose lives in that",
        "script). Every model is built without downloading anything (`weights=None`, library",
        "models from small configs), from a fixed seed, with small inputs, in `eval()` unless its note says train.",
        "For each model, on CPU and on the meta device: the capture sets no `g.error`; its module calls equal, in",
        "order, what a plain global forward pre-hook sees while forward runs (a module outside the model's tree as",
        "such: the capture names it after what it wraps); `len(g.ops)` equals the count of an",
        "empty `TorchDispatchMode`; `g.lint()` passes; every keyword tensor of the call is in `g.inputs` under its",
        "keyword; the replay reproduces the outputs (*replay*: `verify.check`, values on CPU, shapes and dtypes on",
        "meta); in train mode `dt.verify` passes and leaves `state_dict()` as it was. *second input* (CPU): the",
        "replay built from the record alone (`g.to_fx(model)`, no `constants=`), called as the model is called",
        "(`gm(*args, **kwargs)`), reproduces the model's output on a second input of the same shape, so a value",
        "baked into the capture as a constant cannot pass unnoticed; `-` where the ops depend on the values",
        "(detection). *capture / plain* is the wall time of one forward under `dt.capture` over a plain forward:",
        f"the median over {opts.repeat} back-to-back pair(s) (`--repeat`; noisy for models under ~10 ms); *plain ms*",
        "is the best plain forward.",
        "",
        f"torch {torch.__version__}, torchvision {torchvision.__version__}, {versions}, "
        f"Python {platform.python_version()}, "
        f"{os.cpu_count()} CPU cores (load average {load} at the end: other jobs share them, so ratios are indicative), "
        f"{len(pairs)} models, {total:.0f} s in all. "
        f"{len(pairs) - len(failing)} pass every check; {len(failing)} do not"
        + (f": {', '.join(failing)}." if failing else "."),
        "",
        *SLOW,
        "",
        "## torchvision and torch.nn",
        "",
        *table(base),
        "",
        "## transformers and timm (the `zoo` extra)",
        "",
        *LIBRARIES,
        "",
        *table(extra),
        "",
        "## Problems and limitations",
        "",
        *(notes(pairs) or ["None."]),
        "",
    ]
    Path(opts.out).write_text("\n".join(text))
    print(f"wrote {opts.out} ({total:.0f} s)", file=sys.stderr)
    return 0


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    raise SystemExit(main())
