"""The FLOPs of a training step (forward, backward, optimizer) equal FlopCounterMode's for the same step, exactly."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.views._costs import total_flops


class Block(nn.Module):
    """A pre-norm transformer block whose attention is ``F.scaled_dot_product_attention`` (causal)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(16, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.tok(ids) + self.pos(torch.arange(ids.shape[1]))))


def _resnet() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    return torchvision.models.resnet18(weights=None), torch.randn(2, 3, 32, 32), lambda y: y.logsumexp(1).mean()


def _resnet50() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    return torchvision.models.resnet50(weights=None), torch.randn(2, 3, 32, 32), lambda y: y.logsumexp(1).mean()


def _vit() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                 hidden_dim=32, mlp_dim=64, num_classes=10)
    return model, torch.randn(2, 3, 32, 32), lambda y: y.logsumexp(1).mean()


def _lm() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    ids = torch.randint(0, 50, (2, 12))
    return TinyLM(), ids, lambda y: F.cross_entropy(y.flatten(0, 1), ids.flatten())


@pytest.mark.parametrize(("make", "backend"), [(_resnet, None), pytest.param(_resnet50, None, marks=pytest.mark.slow),
                                               (_vit, None), (_lm, None), (_lm, SDPBackend.MATH)],
                         ids=["resnet18", "resnet50", "vit", "transformer-sdpa", "transformer-sdpa-math"])
def test_training_step_flops_equal_flop_counter_mode(make, backend) -> None:  # noqa: ANN001
    """On CPU, SDPA runs ``_scaled_dot_product_flash_attention_for_cpu`` (and its backward), for which
    FlopCounterMode has no formula: neither side counts attention there. The math backend runs
    attention as ``bmm``s, which both count."""
    torch.manual_seed(0)
    model, x, loss_fn = make()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)

    def step() -> None:
        with sdpa_kernel(backend) if backend is not None else nullcontext():
            loss_fn(model(x)).backward()
        opt.step()
        opt.zero_grad()

    step()  # optimizer state exists: both counts see a second step
    with FlopCounterMode(display=False) as counter:
        step()
    with dt.capture(model) as g:
        step()
    g.lint()
    phases = {op.phase for op in g.ops}
    assert {"forward", "backward", "optimizer"} <= phases
    expected = counter.get_total_flops()
    assert total_flops(g) == expected and g.costs().total.flops == expected
    c = g.costs()
    backward = sum(c.op(op).flops or 0 for op in g.ops if op.phase == "backward")
    forward = sum(c.op(op).flops or 0 for op in g.ops if op.phase == "forward")
    assert 1.5 * forward < backward < 2.5 * forward  # backward costs about twice the forward
    if make is _lm:
        attention = [op.target for op in g.ops if "attention" in op.target or op.target.startswith("aten.bmm")]
        fused = "aten._scaled_dot_product_flash_attention_for_cpu.default"
        assert (fused in attention) == (backend is None) and attention
