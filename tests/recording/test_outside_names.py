"""Calls of modules outside the model's tree: named after the function they wrap, else where they are called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt


def as_module(fn: Callable[..., Any]) -> nn.Module:
    """A module built around a function, as the ``kernels`` package's ``use_kernel_forward_from_hub`` builds
    one (its class ``Func``, the function held only by ``forward``'s closure)."""

    class Func(nn.Module):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    return Func()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


apply_rotary = as_module(rotate_half)  # module level, as transformers' modeling files hold them


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = apply_rotary(self.q(x))
        return as_module(torch.sigmoid)(q)  # a module built at call time, around a builtin


def _labels(g: dt.Graph) -> list[tuple[str, str]]:
    return [(c.label, c.type) for c in g.calls]


def test_a_module_wrapping_a_function_is_named_after_it() -> None:
    net = nn.Sequential(Attention(), Attention())
    with torch.no_grad(), dt.capture(net) as g:
        net(torch.randn(2, 4))
    outside = [(label, kind) for label, kind in _labels(g) if kind == "Func"]
    assert outside == [("rotate_half#0", "Func"), ("sigmoid", "Func"), ("rotate_half#1", "Func"), ("sigmoid", "Func")]
    tree = str(g.tree(depth=3))
    assert "rotate_half#0 (Func)" in tree and "Func#" not in tree


class Held(nn.Module):
    """Holds its function as an attribute."""

    def __init__(self, func: Callable[..., Any]) -> None:
        super().__init__()
        self.func = func

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.func(x)


class Caller(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        object.__setattr__(self, "helper", nn.ReLU())  # not registered: outside the tree

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = nn.Sigmoid()  # a local built at call time
        return Held(torch.tanh)(gate(self.helper(self.lin(x))))


def test_else_the_name_at_the_call_site_else_the_class() -> None:
    net = Caller()
    with torch.no_grad(), dt.capture(net) as g:
        net(torch.randn(2, 4))
    assert _labels(g) == [("Caller", "Caller"), ("lin", "Linear"), ("helper", "ReLU"), ("gate", "Sigmoid"), ("tanh", "Held")]
    with torch.no_grad(), dt.capture(net) as g2:
        nn.Sequential(nn.Linear(4, 4))(torch.randn(2, 4))  # no name holds it where it is called: its class
    assert _labels(g2) == [("Sequential", "Sequential"), ("Sequential.0", "Linear")]


def test_without_a_model_every_module_keeps_its_class_name() -> None:
    net = Caller()
    with torch.no_grad(), dt.capture() as g:
        net(torch.randn(2, 4))
    assert [c.label for c in g.calls] == ["Caller", "Caller.lin", "ReLU", "Sigmoid", "Held"]


@pytest.mark.slow
def test_transformers_kernels_func_is_named_after_the_function_it_wraps() -> None:
    pytest.importorskip("transformers", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
    pytest.importorskip("kernels", reason="transformers wraps functions in kernels' Func only where kernels is installed")
    from dispatchtrace.models import build

    config = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 100}
    model, args, kwargs = build("hf:llama", config=config)
    with torch.no_grad(), dt.capture(model) as g:
        model(*args, **kwargs)
    funcs = [c.label for c in g.calls if c.type == "Func"]
    assert funcs and all(label.startswith("apply_rotary_pos_emb") for label in funcs), funcs
