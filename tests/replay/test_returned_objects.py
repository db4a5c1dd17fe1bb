"""Replay returns the objects the forward returned: pytree nodes through torch's pytree, other objects
that hold tensors (Hugging Face caches) made again with the replayed tensors in place."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.serialize import dumps, loads

transformers = pytest.importorskip("transformers")


class Cache:
    """A cache object of the model's own: a list of per-layer tensors and a counter."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.seen = 0


class Cached(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Cache]:
        cache = Cache()
        h = self.fc(x)
        cache.keys.append(h * 2)
        cache.seen = x.shape[0]
        return h.relu(), cache


def test_an_object_holding_tensors_comes_back_with_the_replayed_tensors() -> None:
    model = Cached()
    with dt.capture(model) as g:
        model(torch.randn(2, 4))
    fresh = torch.randn(3, 4)
    out, cache = g.to_fx(model)(fresh)
    want, wanted = model(fresh)
    assert type(cache) is Cache and cache.seen == 2  # the recorded int: the replay runs the recorded shapes' ops
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    torch.testing.assert_close(cache.keys[0], wanted.keys[0], rtol=0, atol=0)


def _tiny(kind: str) -> nn.Module:
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=100, n_positions=32)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=16,
                                   intermediate_size=32, vocab_size=100, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.filterwarnings("ignore::FutureWarning")  # past_key_values, renamed cache in newer transformers
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("saved", [False, True])
def test_a_replayed_hugging_face_cache_drives_the_next_generation_step(kind: str, saved: bool) -> None:
    model = _tiny(kind)
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.tensor([[1, 2, 3]]))  # use_cache=True by default: a DynamicCache among the outputs
    if saved:
        g = loads(dumps(g))
    prompt = torch.tensor([[7, 8, 9]])
    with torch.no_grad():
        got, want = g.to_fx(model)(prompt), model(prompt)
        assert type(got) is type(want)  # a ModelOutput, rebuilt through torch's pytree, not a plain dict
        cache = got.past_key_values
        assert type(cache) is type(want.past_key_values) and cache.get_seq_length() == 3
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=0)
        step = torch.tensor([[4]])
        nxt, expected = model(step, past_key_values=cache), model(step, past_key_values=want.past_key_values)
    torch.testing.assert_close(nxt.logits, expected.logits, rtol=0, atol=0)
    assert nxt.past_key_values.get_seq_length() == 4


def test_verify_compares_the_tensors_inside_a_returned_cache() -> None:
    report = dt.verify(_tiny("gpt2"), torch.tensor([[1, 2, 3]]))
    assert report.ok and report.max_diff == 0.0, str(report)
