"""``dt.models.build``: any model by name with its example inputs, the sizes and the budget, the errors that say what to do.

The ``hf:`` and ``timm:`` tests need the zoo extra (``transformers``, ``timm``); every model is built
from a config, never downloaded. What happens without those packages runs in a subprocess where
importing them fails, as it does when they are not installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from vision import needs_torchvision

import dispatchtrace as dt

ROOT = Path(__file__).resolve().parents[2]
GPT2 = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 100, "n_positions": 64}


def hf() -> None:
    pytest.importorskip("transformers", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")


@needs_torchvision
def test_builtin_and_torchvision_models_come_with_an_image() -> None:
    model, args, kwargs = dt.models.build("coolcnn")
    assert type(model).__name__ == "CoolCNN" and not model.training and kwargs == {}
    assert [tuple(a.shape) for a in args] == [(1, 3, 32, 32)]
    model, (x,), _ = dt.models.build("vit_b_16", config={"image_size": 64}, device="meta")
    assert x.shape == (1, 3, 64, 64) and x.is_meta and all(p.is_meta for p in model.parameters())
    model, (x,), _ = dt.models.build("resnet18", dtype=torch.bfloat16)
    assert model.fc.weight.dtype == x.dtype == torch.bfloat16
    assert model(x).shape == (1, 1000)


def test_a_gpt2_config_with_overrides_and_token_ids_of_a_chosen_length() -> None:
    hf()
    model, args, kwargs = dt.models.build("hf:gpt2", config=GPT2, seq=12, batch=3)
    assert type(model).__name__ == "GPT2LMHeadModel" and model.config.n_layer == 2 and not model.training
    assert args == () and list(kwargs) == ["input_ids"]
    ids = kwargs["input_ids"]
    assert ids.shape == (3, 12) and ids.dtype == torch.int64 and 0 <= int(ids.min()) and int(ids.max()) < 100
    with dt.capture(model) as g:
        out = model(*args, **kwargs)
    assert out.logits.shape == (3, 12, 100) and [i.name for i in g.inputs][:1] == ["input_ids"]
    with pytest.raises(dt.ModelError, match="at most 64 positions"):
        dt.models.build("hf:gpt2", config=GPT2, seq=65)


def test_the_task_picks_the_class_and_the_inputs_follow_the_model() -> None:
    hf()
    small = {"bert": {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64},
             "t5": {"num_layers": 1, "d_model": 32, "d_kv": 16, "d_ff": 64, "num_heads": 2},
             "vit": {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
                     "image_size": 32, "patch_size": 8},
             "whisper": {"encoder_layers": 1, "decoder_layers": 1, "d_model": 32, "encoder_attention_heads": 2,
                         "decoder_attention_heads": 2, "num_mel_bins": 16, "max_source_positions": 8}}
    shapes = {}
    for name, config in small.items():
        model, args, kwargs = dt.models.build(f"hf:{name}", config=config, seq=6)
        shapes[name] = (type(model).__name__, {k: tuple(v.shape) for k, v in kwargs.items()})
        with torch.no_grad():
            model(*args, **kwargs)  # the inputs fit the model
    assert shapes == {
        "bert": ("BertForMaskedLM", {"input_ids": (1, 6)}),  # an encoder: masked-lm before causal-lm
        "t5": ("T5ForConditionalGeneration", {"input_ids": (1, 6), "decoder_input_ids": (1, 6)}),
        "vit": ("ViTModel", {"pixel_values": (1, 3, 32, 32)}),  # the config's image size
        "whisper": ("WhisperForConditionalGeneration", {"input_features": (1, 16, 16), "decoder_input_ids": (1, 6)}),
    }
    model, _, _ = dt.models.build("hf:bert", config=small["bert"], task="base")
    assert type(model).__name__ == "BertModel"
    model, _, _ = dt.models.build("hf:t5", config=small["t5"], task="base")
    assert type(model).__name__ == "T5Model"
    with pytest.raises(dt.ModelError, match=r"hf:gpt2 has no seq2seq model; its tasks: causal-lm, base"):
        dt.models.build("hf:gpt2", task="seq2seq")


def test_a_7b_default_config_builds_on_meta_and_is_refused_above_the_budget_on_cpu() -> None:
    hf()
    size = dt.models.size("hf:llama")
    assert size.cls == "LlamaForCausalLM" and 6.5e9 < size.params < 7e9 and size.nbytes >= 4 * size.params
    assert str(size).startswith("hf:llama is LlamaForCausalLM: 6.7 G parameters, 27 GB of weights in float32")
    assert dt.models.size("hf:llama", dtype=torch.bfloat16).nbytes * 2 == size.nbytes
    model, _, kwargs = dt.models.build("hf:llama", device="meta")
    assert sum(p.numel() for p in model.parameters()) == size.params
    assert all(p.is_meta for p in model.parameters()) and kwargs["input_ids"].is_meta
    with pytest.raises(dt.ModelTooLargeError) as e:
        dt.models.build("hf:llama", max_bytes=8e9)
    assert (e.value.nbytes, e.value.budget) == (size.nbytes, 8_000_000_000)
    assert "above the memory budget of 8.0 GB on the CPU" in str(e.value) and "--device meta" in str(e.value)
    tiny = dt.models.size("hf:gpt2", config=GPT2)
    assert tiny.params == sum(p.numel() for p in dt.models.build("hf:gpt2", config=GPT2).model.parameters())
    with pytest.raises(dt.ModelTooLargeError):
        dt.models.build("hf:gpt2", config=GPT2, max_bytes=tiny.nbytes - 1)


def test_timm_models_by_name_at_their_input_size() -> None:
    pytest.importorskip("timm", reason="the zoo extra: pip install 'dispatchtrace[zoo]'")
    model, (x,), kwargs = dt.models.build("timm:convnext_atto")
    assert type(model).__name__ == "ConvNeXt" and x.shape == (1, 3, 224, 224) and kwargs == {}
    model, (x,), _ = dt.models.build("timm:vit_tiny_patch16_224", config={"img_size": 64}, device="meta")
    assert x.shape == (1, 3, 64, 64) and model(x).shape == (1, 1000)
    with pytest.raises(dt.ModelError, match=r"create_model\('convnext_atto', \*\*\{'no_such': 1\}\) raised TypeError"):
        dt.models.build("timm:convnext_atto", config={"no_such": 1})


@needs_torchvision
@pytest.mark.parametrize(("spec", "suggested"), [
    ("gpt2", "did you mean hf:gpt2?"),                       # a transformers model type, without hf:
    ("bert-base-uncased", "did you mean hf:bert?"),          # a checkpoint name: its model type
    ("meta-llama/Llama-2-7b-hf", "did you mean hf:llama?"),
    ("vit_tiny_patch16_224", "did you mean timm:vit_tiny_patch16_224?"),
    ("resnet5", "did you mean resnet50 or resnet152 or resnet18?"),
    ("hf:gtp2", "did you mean hf:gpt2"),
    ("hf:bert-base-uncased", "did you mean hf:bert?"),
    ("timm:convnext_tny", "did you mean timm:convnext_tiny"),
])
def test_a_name_that_fits_nothing_gets_did_you_mean_across_the_catalogues(spec: str, suggested: str) -> None:
    if spec.startswith("hf:") or "-" in spec or spec == "gpt2":
        hf()
    if "timm" in spec or spec.startswith("vit_tiny"):
        pytest.importorskip("timm")
    with pytest.raises(dt.ModelError, match="did you mean") as e:
        dt.models.build(spec)
    assert suggested in str(e.value)


def test_options_a_catalogue_does_not_take_and_config_keys_a_model_lacks_are_refused() -> None:
    with pytest.raises(dt.ModelError, match=r"task= \(--task\) applies to hf: models, not to coolcnn"):
        dt.models.build("coolcnn", task="base")
    with pytest.raises(dt.ModelError, match=r"config= \(--config\) applies to hf:, timm: and torchvision models"):
        dt.models.build("coolcnn", config={"x": 1})
    with pytest.raises(dt.ModelError, match="malformed config override 'n_layer'"):
        dt.models.parse_config(["n_layer"])
    hf()
    with pytest.raises(dt.ModelError, match=r"GPT2Config\) has no 'num_layers'; did you mean n_layer\?"):
        dt.models.build("hf:gpt2", config={"num_layers": 2})


@needs_torchvision
def test_each_catalogue_lists_its_names() -> None:
    assert "resnet50" in dt.models.names() and dt.models.names("builtin") == ["coolcnn"]
    hf()
    assert {"gpt2", "llama", "t5", "bert", "vit", "whisper"} <= set(dt.models.names("hf"))


ZOO_TYPES = ["gpt2", "bert", "t5", "llama", "mixtral", "whisper", "swin"]  # benchmarks/zoo_libraries.py's hf: entries


@pytest.mark.parametrize("name", ZOO_TYPES)
def test_every_model_type_of_the_zoo_builds_by_name_from_its_default_config(name: str) -> None:
    hf()
    model, args, kwargs = dt.models.build(f"hf:{name}", device="meta")
    assert model.config.model_type == name and all(p.is_meta for p in model.parameters())
    assert kwargs and all(t.is_meta for t in kwargs.values())


@needs_torchvision
def test_the_zoo_specs_name_their_builder() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import zoo

    notes = {s.name: s.note for s in zoo.specs(libraries=True) if s.library == "transformers"}
    assert {n.split(",")[0].split()[0] for n in notes.values()} >= {f"hf:{t}" for t in ZOO_TYPES}


WITHOUT = """
import contextlib, io, sys
sys.modules["transformers"] = None  # importing it now fails, as it does where it is not installed
sys.modules["timm"] = None
from dispatchtrace import cli
for spec in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main([spec])
    print(status, err.getvalue(), end="")
"""


@needs_torchvision
def test_without_transformers_or_timm_one_line_says_what_to_install() -> None:
    specs = ["hf:gpt2", "timm:convnext_tiny", "resnet5", "gpt2"]
    r = subprocess.run([sys.executable, "-c", WITHOUT, *specs], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(specs) and all(line.startswith("2 dispatchtrace: error: ") for line in lines), lines
    assert "hf: models need the transformers package, which is not installed: pip install transformers" in lines[0]
    assert "timm: models need the timm package, which is not installed: pip install timm" in lines[1]
    assert "did you mean resnet50 or resnet152 or resnet18?" in lines[2]  # the other catalogues still suggest
    assert "unknown model 'gpt2'; MODEL is" in lines[3]  # no transformers: no hf: suggestion, no traceback
