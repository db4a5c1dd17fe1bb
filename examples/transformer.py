"""A small transformer language model: residual branches in every layer, token ids as input.

Run: python examples/transformer.py [OUT.svg]   (also writes a diagram, default transformer.svg)

``nn.TransformerEncoderLayer`` has a fused fast path (one ``aten::_transformer_encoder_layer_fwd``
op per layer) that PyTorch takes in eval mode without autograd; the capture shows whatever
actually ran, so this example runs with autograd on to see the layers' inner structure.
"""

import sys

import torch
import torch.nn as nn

import dispatchtrace as dt


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 64, heads: int = 4, layers: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embed(tokens))))


def main(out: str = "transformer.svg") -> None:
    torch.manual_seed(0)
    model = TinyLM().eval()
    tokens = torch.randint(0, 100, (1, 12))
    with dt.capture(model) as g:
        model(tokens)

    print(g.tree(depth=3))
    # inside one attention call, at op level: the q, k and v paths, joined by the attention op
    print()
    print(g.tree(at="encoder.layers.0.self_attn", ops=True))
    layers = [c for c in g.calls if c.type == "TransformerEncoderLayer"]
    print(f"\n{len(layers)} encoder layer calls, {len(g.ops)} ATen ops in all")
    try:
        g.render(out)  # identical consecutive layers fold into one box marked x3
    except RuntimeError as e:  # graphviz's dot is missing: the DOT source still works
        print(e, file=sys.stderr)
        out = g.render(out.rsplit(".", 1)[0] + ".dot")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
