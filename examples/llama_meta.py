"""Size a 7B Llama-style decoder without memory: build it on ``meta``, capture one forward, print FLOPs per layer.

The model is plain torch: 32 decoder layers, hidden size 4096, grouped-query attention (32 query
heads, 8 key/value heads, head size 128) with rotary position embeddings, SwiGLU MLP with
intermediate size 14336, RMSNorm, vocabulary 32000, untied output head (the Mistral-7B shape,
7.24 B parameters). Nothing is allocated: every tensor lives on the ``meta`` device.

    python examples/llama_meta.py                      # 1 x 2048 tokens, writes examples/llama_meta.md
    python examples/llama_meta.py --seq 4096 --out /tmp/llama.md

It reports the capture time, the cost computation time, the peak RSS of the process
(``resource.getrusage``) and checks the FLOP total against ``torch.utils.flop_counter.FlopCounterMode``.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import dispatchtrace as dt
from dispatchtrace.views._summary import human


@dataclass(frozen=True)
class Config:
    vocab: int = 32000
    dim: int = 4096
    layers: int = 32
    heads: int = 32
    kv_heads: int = 8
    hidden: int = 14336
    max_seq: int = 8192
    eps: float = 1e-5
    theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).type_as(x) * self.weight


class Rotary(nn.Module):
    """cos/sin tables as (non-persistent) buffers, applied to q and k by rotating half the head dims."""

    def __init__(self, head_dim: int, max_seq: int, theta: float) -> None:
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        freqs = torch.outer(torch.arange(max_seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = q.shape[-2]
        cos, sin = self.cos[:s].to(q.dtype), self.sin[:s].to(q.dtype)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.dim // c.heads
        self.q_proj = nn.Linear(c.dim, c.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * self.head_dim, c.dim, bias=False)
        self.rotary = Rotary(self.head_dim, c.max_seq, c.theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)  # -1: the local heads under tensor parallelism
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q, k = self.rotary(q, k)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, c: Config) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(c.dim, c.hidden, bias=False)
        self.up_proj = nn.Linear(c.dim, c.hidden, bias=False)
        self.down_proj = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.input_norm = RMSNorm(c.dim, c.eps)
        self.attn = Attention(c)
        self.post_attn_norm = RMSNorm(c.dim, c.eps)
        self.mlp = MLP(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x))
        return x + self.mlp(self.post_attn_norm(x))


class Llama(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps)
        self.lm_head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence (default 2048)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".md"), help="markdown report to write")
    args = p.parse_args(argv)

    rss_start = peak_rss_mb()
    config = Config(layers=args.layers)
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = Llama(config).eval()
    t_build = time.perf_counter() - t0
    rss_built = peak_rss_mb()
    tokens = torch.zeros(args.batch, args.seq, dtype=torch.int64, device="meta")

    t0 = time.perf_counter()
    with torch.no_grad(), dt.capture(model) as g:
        model(tokens)
    t_capture = time.perf_counter() - t0
    t0 = time.perf_counter()
    total = g.costs().total
    rows = g.summary().rows()
    t_costs = time.perf_counter() - t0
    rss_peak = peak_rss_mb()

    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    reference = counter.get_total_flops()

    layers = [r for r in rows if r["type"] == "DecoderLayer"]
    lines = [
        f"# Llama-style 7B decoder on meta: {args.batch} x {args.seq} tokens",
        "",
        f"`python examples/llama_meta.py --seq {args.seq} --batch {args.batch} --layers {args.layers}` "
        f"(torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}).",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| parameters | {total.params:,} ({human(total.params)}) |",
        f"| ops captured | {len(g.ops):,} in {len(g.calls):,} module calls |",
        f"| FLOPs (dispatchtrace) | {total.flops:,} ({human(total.flops, 'FLOPs')}) |",
        f"| FLOPs (FlopCounterMode) | {reference:,} ({'equal' if reference == total.flops else 'DIFFERENT'}) |",
        f"| bytes written by ops (not views) | {human(total.bytes, 'B')} |",
        f"| build on meta | {t_build:.2f} s |",
        f"| capture | {t_capture:.2f} s |",
        f"| costs + summary | {t_costs:.2f} s |",
        f"| peak RSS (whole process) | {rss_peak:.0f} MB (after imports: {rss_start:.0f} MB, "
        f"after building the model: {rss_built:.0f} MB) |",
        "",
        "## FLOPs per layer",
        "",
        "| call | FLOPs | attention + projections | MLP | output |",
        "|---|---:|---:|---:|---|",
    ]
    by_path = {r["path"]: r for r in rows}
    for r in layers:
        attn, mlp = by_path[r["path"] + ".attn"], by_path[r["path"] + ".mlp"]
        lines.append(f"| {r['label']} | {human(r['flops'], 'FLOPs')} | {human(attn['flops'], 'FLOPs')} "
                     f"| {human(mlp['flops'], 'FLOPs')} | {r['output']} |")
    head = by_path["lm_head"]
    lines.append(f"| lm_head | {human(head['flops'], 'FLOPs')} | | | {head['output']} |")
    lines += ["", "## Summary (depth 1)", "", g.summary(depth=1).markdown(), ""]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text, encoding="utf-8")
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0 if reference == total.flops else 1


if __name__ == "__main__":
    sys.exit(main())
