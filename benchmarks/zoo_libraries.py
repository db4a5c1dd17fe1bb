"""Zoo entries from the libraries people use: Hugging Face ``transformers`` and ``timm``, from small configs.

Every model is built by ``dt.models.build``, the builder of ``dispatchtrace hf:TYPE --config ...`` and
``dispatchtrace timm:NAME``, from a small config (``hf:`` types with 2 layers and hidden sizes of
32-64, ``timm:`` names at a 64x64 image), with the builder's inputs: nothing is downloaded.
``HF_HUB_OFFLINE=1`` is set before ``transformers`` or ``timm`` is imported, so an accidental hub
access fails loudly instead of hanging. Both libraries are test-only (the ``zoo`` extra).

Each entry is a ``zoo.Spec`` (``inputs`` returns ``(args, kwargs)``, so keyword inputs fit; ``train``,
``loss`` and ``value_dependent`` say how ``zoo.run`` runs it); ``zoo.specs(libraries=True)`` appends
them to the torchvision zoo, so they get every check of the one zoo.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"  # models come from configs; a hub access must fail, not hang
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import Inputs, Spec  # noqa: E402

import dispatchtrace as dt  # noqa: E402

VOCAB = 100


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _model(spec: str, config: dict[str, Any] | None = None, **options: Any) -> Callable[[], nn.Module]:
    """``dt.models.build(spec, config=config).model``, as ``dispatchtrace SPEC --config ...`` builds it."""
    return lambda: dt.models.build(spec, config=config, **options).model


def _inputs(spec: str, config: dict[str, Any], **options: Any) -> Callable[[], Inputs]:
    """The builder's inputs for ``spec`` (fresh ones each call, from the global random state)."""
    return lambda: dt.models.inputs(spec, config=config, **options)


# ---- Hugging Face transformers: small configs of the model types, through dt.models.build -----------
_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
GPT2 = {"vocab_size": VOCAB, "n_positions": 64, "n_embd": 32, "n_layer": 2, "n_head": 2, "bos_token_id": 1,
        "eos_token_id": 2, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
BERT = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64}
T5 = {"vocab_size": VOCAB, "d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
      "num_heads": 2, "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}
LLAMA = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64, **_IDS}
MIXTRAL = {**LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2}
_MELS, _FRAMES = 16, 32  # Whisper's encoder needs exactly 2 * max_source_positions input frames (the builder's)
WHISPER = {"vocab_size": VOCAB, "num_mel_bins": _MELS, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
           "max_source_positions": _FRAMES // 2, "max_target_positions": 32, **_IDS, "decoder_start_token_id": 1,
           "suppress_tokens": [], "begin_suppress_tokens": []}
SWIN = {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [2, 2], "num_heads": [2, 2], "window_size": 4,
        "mlp_ratio": 2.0}


def _gpt2(checkpointing: bool = False) -> nn.Module:
    model = dt.models.build("hf:gpt2", config={**GPT2, "use_cache": not checkpointing}).model
    if checkpointing:
        options = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x; the old name warns
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
    return model


def _bert_inputs() -> Inputs:
    _, kwargs = dt.models.inputs("hf:bert", config=BERT, task="base", seq=8, batch=2)
    mask = torch.ones_like(kwargs["input_ids"])
    mask[1, 5:] = 0  # the second sequence is padded
    return (), {**kwargs, "attention_mask": mask}


# ---- timm ----------------------------------------------------------------------------------------
def _timm(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    return _model(f"timm:{name}", kwargs or None)


def _image(size: int = 64) -> Callable[[], Inputs]:
    return lambda: ((torch.randn(1, 3, size, size),), {})


# ---- gradient checkpointing ----------------------------------------------------------------------
class Checkpointed(nn.Module):
    """The issue's example: ``checkpoint(self.a, x, use_reentrant=False)``; backward recomputes ``a``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(8, 8), nn.GELU())
        self.b = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(checkpoint(self.a, x, use_reentrant=False))


def specs() -> list[Spec]:
    """Seven ``transformers`` models, four ``timm`` models (one also in train mode, Swin also with its mask built in forward) and two gradient-checkpointing cases."""
    hf, tm = "transformers", "timm"
    return [
        Spec("hf gpt2", _gpt2, _inputs("hf:gpt2", GPT2, seq=8, batch=2), library=hf,
                note="hf:gpt2, 2 layers, n_embd 32, vocab 100, default cache (use_cache=True)"),
        Spec("hf bert (keywords)", _model("hf:bert", BERT, task="base"), _bert_inputs, library=hf,
                note="hf:bert --task base, called as m(input_ids=, attention_mask=), one padded row"),
        Spec("hf t5", _model("hf:t5", T5), _inputs("hf:t5", T5, seq=8, batch=2), library=hf,
                note="hf:t5, m(input_ids=, decoder_input_ids=)"),
        Spec("hf llama", _model("hf:llama", LLAMA), _inputs("hf:llama", LLAMA, seq=8, batch=2), library=hf,
                note="hf:llama, GQA (1 kv head), default cache"),
        Spec("hf mixtral", _model("hf:mixtral", MIXTRAL), _inputs("hf:mixtral", MIXTRAL, seq=8, batch=2), library=hf,
                note="hf:mixtral, 4 experts, top 2: routed with aten._grouped_mm, so the ops do not depend on the routing"),
        Spec("hf whisper", _model("hf:whisper", WHISPER), _inputs("hf:whisper", WHISPER, seq=5), library=hf,
                note="hf:whisper, m(input_features=1x16x32, decoder_input_ids=)"),
        Spec("hf swin", _model("hf:swin", SWIN), _inputs("hf:swin", SWIN), library=hf,
                note="hf:swin, 32x32, window 4: the shifted-window mask is built in forward from arange and comparisons"),
        Spec("timm efficientnet_b0", _timm("efficientnet_b0"), _image(), library=tm),
        Spec("timm efficientnet_b0 (train)", _timm("efficientnet_b0"), lambda: ((torch.randn(2, 3, 64, 64),), {}),
                library=tm, train=True, note="train mode: BatchNorm updates its running stats on every forward"),
        Spec("timm convnext_atto", _timm("convnext_atto"), _image(), library=tm),
        Spec("timm vit_tiny_patch16_224", _timm("vit_tiny_patch16_224", img_size=64),
                _inputs("timm:vit_tiny_patch16_224", {"img_size": 64}), library=tm,
                note="img_size=64"),
        Spec("timm swin_tiny_patch4_window7_224", _timm("swin_tiny_patch4_window7_224", img_size=64, window_size=4),
                _inputs("timm:swin_tiny_patch4_window7_224", {"img_size": 64, "window_size": 4}), library=tm, note="img_size=64, window_size=4"),
        Spec("timm swin (dynamic mask)",
                _timm("swin_tiny_patch4_window7_224", img_size=64, window_size=4, strict_img_size=False), _image(),
                library=tm, note="strict_img_size=False: the shifted-window mask is built in forward (img_mask[...] = cnt)"),
        Spec("checkpoint (nn)", Checkpointed, lambda: ((torch.randn(4, 8, requires_grad=True),), {}),
                library="torch.utils.checkpoint", train=True, loss=lambda out: out.sum(), note="checkpoint(self.a, x, use_reentrant=False), backward in the block"),
        Spec("hf gpt2 (gradient checkpointing)", lambda: _gpt2(checkpointing=True), _inputs("hf:gpt2", GPT2, seq=8, batch=2),
                library=hf, train=True, loss=lambda out: _logits(out).sum(),
                note="train mode, dropout 0, use_reentrant=False, backward in the block"),
    ]
