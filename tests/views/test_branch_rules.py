"""Branches and joins in the tree only where data really splits and merges (issue 9)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from models import coolcnn, traced
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.views._tree import TreeNode


def node(g: dt.Graph, text: str, **options: object) -> TreeNode:
    """The tree node of the call printed as ``text`` (``embed (Emb)``)."""
    return next(n for n in g.tree(**options).walk() if n.text == text)


def shape(n: TreeNode) -> list:
    """A node's children as text, parallel blocks as nested lists of branches."""
    return [[shape(b) if b.kind == "branch" else "skip" for b in c.children] if c.kind == "parallel"
            else f"{c.text} ({c.note})" if c.note else c.text for c in n.children]


# ---- the join note sits on the node that reads from the branches --------------------------------


class MaskedFill(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        # lift_fresh of the constant runs after gt, before index_put_ (the join); spelled as the op, since
        # torch 2.15 runs ``y[y > 0] = 0.5`` as one masked_fill_ (no constant, no index_put_)
        return y.index_put_((y > 0,), torch.tensor(0.5))


class CountsCalls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        m = y > 0
        self.calls += 1  # reads no activation, read by nothing
        return y * m


class Noisy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        return torch.addcmul(torch.randn(3), y, torch.relu(y))  # randn: made just before the join reads it


@pytest.mark.parametrize(("model", "before", "join"), [
    (MaskedFill(), "aten::lift_fresh", "aten::index_put_"),
    (CountsCalls(), "aten::add_", "aten::mul"),
    (Noisy(), "aten::randn", "aten::addcmul"),
])
def test_the_join_note_is_on_the_node_that_reads_the_branches(model: nn.Module, before: str, join: str) -> None:
    g = traced(model, torch.randn(3))
    kids = g.tree(ops=True, noise=True).root.children  # noise: the buffer counter is shown too
    assert [k.kind for k in kids] == ["op", "parallel", "op", "op"]
    assert [(k.text, k.note) for k in kids[2:]] == [(before, ""), (join, "joins 2 branches")]


# ---- no branch made of nothing -----------------------------------------------------------------


class Embed(nn.Module):
    def __init__(self, last: nn.Module) -> None:
        super().__init__()
        self.lin, self.norm = nn.Linear(4, 4), last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.lin(x))


class WithEmbed(nn.Module):
    def __init__(self, last: nn.Module) -> None:
        super().__init__()
        self.embed, self.out = Embed(last), nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(x))


@pytest.mark.parametrize("last", [nn.Identity(), nn.Dropout(0.1)], ids=["Identity", "Dropout"])
def test_a_trailing_call_without_ops_is_no_branch(last: nn.Module) -> None:
    g = traced(WithEmbed(last).eval(), torch.randn(1, 4))
    assert shape(node(g, "embed (Embed)")) == ["embed.lin (Linear)", f"embed.norm ({type(last).__name__})"]
    assert not any(n.kind in ("parallel", "skip") for n in g.tree().walk())


# ---- a tensor from outside the block read by one node is an extra input --------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, h: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor) -> torch.Tensor:
        b, s, d = h.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, -1).transpose(1, 2)

        cos, sin = position_embeddings
        q, k, v = heads(self.q_proj(h)), heads(self.k_proj(h)), heads(self.v_proj(h))
        q = q * cos + rotate_half(q) * sin  # the rotary table: read by q and by k
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(dim, 2 * dim, bias=False)
        self.down_proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Llama's decoder layer as Hugging Face writes it: the mask and the rotary table come from the parent."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.self_attn, self.mlp = Attention(dim, heads), MLP(dim)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                position_embeddings: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings=position_embeddings,
                                       attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class Rotary(nn.Module):
    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() / 10000 ** (torch.arange(0, 4, 2).float() / 4)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class TinyLlama(nn.Module):
    def __init__(self, vocab: int = 11, dim: int = 8, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.embed_tokens, self.rotary_emb = nn.Embedding(vocab, dim), Rotary()
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(layers))
        self.norm = RMSNorm(dim)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(input_ids)
        s = input_ids.shape[1]
        position_embeddings = self.rotary_emb(h, torch.arange(s))
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        for layer in self.layers:
            h = layer(h, attention_mask=mask, position_embeddings=position_embeddings)
        return self.norm(h)


@pytest.fixture(scope="module")
def llama() -> dt.Graph:
    torch.manual_seed(0)
    return traced(TinyLlama().eval(), torch.randint(0, 11, (1, 5)), grad=False)


def test_decoder_layer_shows_its_two_residuals_and_no_input_layernorm_skip(llama: dt.Graph) -> None:
    for i in range(2):
        p = f"layers.{i}"
        assert shape(node(llama, f"{p} (DecoderLayer)")) == [
            [[f"{p}.input_layernorm (RMSNorm)", f"{p}.self_attn (Attention)"], "skip"],
            "aten::add (joins 2 branches)",
            [[f"{p}.post_attention_layernorm (RMSNorm)", f"{p}.mlp (MLP)"], "skip"],
            "aten::add (joins 2 branches)",
        ]


def test_a_rotary_table_and_a_mask_are_extra_inputs(llama: dt.Graph) -> None:
    attn = node(llama, "layers.0.self_attn (Attention)")
    top = shape(attn)
    assert [branch[:3] for branch in top[0]] == [
        [f"layers.0.self_attn.{x}_proj (Linear)", "aten::view", "aten::transpose"] for x in "qkv"]
    # q * cos + rotate_half(q) * sin: the rotation's own split and join, not a path from the table
    assert top[0][0][3:] == [[["aten::mul"], ["aten::split", [["aten::neg"], "skip"], "aten::cat (joins 2 branches)",
                                              "aten::mul"]], "aten::add (joins 2 branches)"]
    # the mask is turned into an additive one just before the attention reads it; q, k and v join there
    assert top[1:4] == ["aten::scalar_tensor", "aten::scalar_tensor", "aten::where"]
    assert top[4].startswith("aten::_scaled_dot_product") and top[4].endswith("(joins 3 branches)")
    assert not any(n.note.startswith("<-") for n in attn.walk())  # nothing left tangled


class EncoderDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder, self.decoder = nn.Linear(4, 4), nn.Bilinear(4, 4, 4)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        memory = self.encoder(src)
        return self.decoder(tgt, memory), memory  # the memory is returned too, as Hugging Face models do


def test_an_encoder_decoder_is_a_chain() -> None:
    g = traced(EncoderDecoder(), torch.randn(1, 4), torch.randn(1, 4))
    assert shape(node(g, "EncoderDecoder")) == ["encoder (Linear)", "decoder (Bilinear)"]


def test_nn_transformer_is_a_chain_down_to_its_residuals() -> None:
    torch.manual_seed(0)
    model = nn.Transformer(16, 2, 2, 2, 32, batch_first=True).eval()
    g = traced(model, torch.randn(2, 7, 16), torch.randn(2, 5, 16), grad=False)
    tree = g.tree(2)
    assert shape(node(g, "Transformer", depth=2)) == ["encoder (TransformerEncoder)", "decoder (TransformerDecoder)"]
    assert shape(node(g, "decoder (TransformerDecoder)", depth=2)) == [
        "decoder.layers.0 (TransformerDecoderLayer)", "decoder.layers.1 (TransformerDecoderLayer)",
        "decoder.norm (LayerNorm)"]
    layer = next(n for n in g.tree(3).walk() if n.text == "decoder.layers.0 (TransformerDecoderLayer)")
    # self-attention, cross-attention (reads the memory as an extra input) and the MLP: three residuals
    assert [c.note for c in layer.children if c.note] == ["joins 2 branches"] * 3
    assert [len(c.children) for c in layer.children if c.kind == "parallel"] == [2, 2, 2]
    assert not any(n.kind == "skip" for n in tree.walk())


# ---- what must stay ---------------------------------------------------------------------------------


def test_coolcnn_keeps_its_two_branches_and_the_join() -> None:
    g = coolcnn()
    top = shape(g.tree(1).root)
    assert top[:2] == [
        [["initial_conv (Conv2d)", "aten::relu", "max_pool#0 (MaxPool2d)"],
         ["parallel_conv (Conv2d)", "aten::relu", "max_pool#1 (MaxPool2d)"]],
        "aten::add (joins 2 branches)",
    ]
    assert sum(isinstance(x, list) for x in top) == 1


def test_resnet_blocks_keep_the_residual_and_the_downsample_path() -> None:
    torch.manual_seed(0)
    g = traced(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64), grad=False)
    first = shape(node(g, "layer2.0 (BasicBlock)"))
    assert first[0][1] == ["layer2.0.downsample (Sequential)"] and first[1] == "aten::add_ (joins 2 branches)"
    second = shape(node(g, "layer2.1 (BasicBlock)"))
    assert second[0][1] == "skip" and second[1] == "aten::add_ (joins 2 branches)"


class WeightedFork(nn.Module):
    """Two paths from one input; one multiplies by a transposed weight made inside the call."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.w.t()  # aten::t reads only the weight: it carries nothing from x
        z = x + 1
        return y * z


def test_a_path_through_a_weight_transform_is_still_a_branch() -> None:
    g = traced(WeightedFork(), torch.randn(2, 3))
    kids = g.tree(ops=True).root.children
    assert [k.kind for k in kids] == ["parallel", "op"]
    assert [[c.text for c in b.children] for b in kids[0].children] == [["aten::t", "aten::mm"], ["aten::add"]]
    assert kids[1].note == "joins 2 branches"
