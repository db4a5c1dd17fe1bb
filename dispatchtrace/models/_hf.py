"""``hf:TYPE``: a ``transformers`` model type from its default config (``AutoConfig.for_model``), random weights, no download."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn as nn

from ..errors import ModelError
from ._close import close_matches
from ._tensors import random_tensor

Task = Literal["causal-lm", "masked-lm", "seq2seq", "base"]
TASKS: tuple[Task, ...] = ("causal-lm", "masked-lm", "seq2seq", "base")
_DEFAULT_ORDER: tuple[Task, ...] = ("seq2seq", "masked-lm", "causal-lm", "base")
#: task -> (auto class, the transformers mapping of model type -> class name it consults), in order
_AUTO: dict[Task, tuple[tuple[str, str], ...]] = {
    "causal-lm": (("AutoModelForCausalLM", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),),
    "masked-lm": (("AutoModelForMaskedLM", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),),
    "seq2seq": (("AutoModelForSeq2SeqLM", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
                ("AutoModelForSpeechSeq2Seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES")),
    "base": (("AutoModel", "MODEL_MAPPING_NAMES"),),
}
DEFAULT_SEQ = 16
INSTALL = "pip install transformers (or dispatchtrace's zoo extra: pip install 'dispatchtrace[zoo]')"


def transformers() -> Any:
    """The ``transformers`` package, or a ``ModelError`` saying how to install it."""
    try:
        import transformers
    except ImportError as e:
        raise ModelError(f"hf: models need the transformers package, which is not installed: {INSTALL}") from e
    return transformers


def model_types() -> list[str]:
    """Every model type ``AutoConfig.for_model`` knows (``gpt2``, ``llama``, ``t5``, ...), sorted."""
    transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


def guess_type(name: str, types: list[str]) -> str | None:
    """The model type a hub checkpoint name starts with: ``bert-base-uncased`` -> ``bert``,
    ``meta-llama/Llama-2-7b-hf`` -> ``llama``; ``None`` when none does.

    >>> guess_type("meta-llama/Llama-2-7b-hf", ["llama", "bert"]), guess_type("gpt2", ["gpt2"]), guess_type("x", ["y"])
    ('llama', 'gpt2', None)
    """
    key = name.rsplit("/", 1)[-1].lower().replace("-", "_")
    for t in sorted(types, key=len, reverse=True):
        norm = t.replace("-", "_")
        if key == norm or (key.startswith(norm) and not key[len(norm)].isalpha()):
            return t
    return None


def _mapping(name: str) -> dict[str, Any]:
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, name, {})


def tasks_of(model_type: str) -> list[Task]:
    """The tasks ``model_type`` has a model class for, in ``TASKS`` order."""
    return [t for t in TASKS if any(model_type in _mapping(m) for _, m in _AUTO[t])]


@dataclass(frozen=True)
class HfModel:
    """A resolved ``hf:`` spec: the config (defaults plus overrides), the task and the class it picks."""

    model_type: str
    config: Any
    task: Task
    auto: str
    cls_name: str

    def make(self) -> nn.Module:
        if self.auto:
            return getattr(transformers(), self.auto).from_config(self.config)
        return self.model_class()(self.config)  # a part model (clip_text_model) no auto class maps

    def model_class(self) -> Any:
        found = getattr(transformers(), self.cls_name, None)
        return found if found is not None else getattr(_modeling_module(self.config), self.cls_name)

    def inputs(self, *, seq: int | None, batch: int, device: torch.device,
               dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The keyword inputs the model's forward takes, shaped from the config (see ``_tensor``)."""
        cls = self.model_class()
        params = inspect.signature(cls.forward).parameters
        main = getattr(cls, "main_input_name", "input_ids")
        names = list(main) if isinstance(main, (list, tuple)) else [main]
        if self.model_type in _mapping("MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES"):
            names = ["input_ids", "pixel_values"]  # CLIP and kin: text and image together
        if getattr(self.config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            names.append("decoder_input_ids")
        return (), {n: self._tensor(n, seq, batch, device, dtype) for n in names}

    def _tensor(self, name: str, seq: int | None, batch: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        config = self.config
        if name in ("input_ids", "decoder_input_ids"):
            text = _text_config(config, decoder=name == "decoder_input_ids")
            most = _positions(text, decoder=name == "decoder_input_ids")
            if seq is not None and most is not None and seq > most:
                raise ModelError(f"hf:{self.model_type} takes at most {most} positions; ask for fewer (seq=, --seq)")
            n = seq or min(DEFAULT_SEQ, most or DEFAULT_SEQ)
            return random_tensor((batch, n), torch.int64, device, high=int(getattr(text, "vocab_size", 2) or 2))
        if name == "pixel_values":
            vision = getattr(config, "vision_config", None) or config
            size = getattr(vision, "image_size", 224)
            h, w = (size, size) if isinstance(size, int) else tuple(size)[-2:]
            return random_tensor((batch, int(getattr(vision, "num_channels", 3)), h, w), dtype, device)
        if name == "input_features":
            if hasattr(config, "num_mel_bins") and hasattr(config, "max_source_positions"):  # Whisper: exactly 2 x positions frames
                return random_tensor((batch, config.num_mel_bins, 2 * config.max_source_positions), dtype, device)
            if hasattr(config, "input_feat_per_channel"):  # Speech2Text: frames x features
                feats = config.input_feat_per_channel * getattr(config, "input_channels", 1)
                return random_tensor((batch, 4 * (seq or DEFAULT_SEQ), feats), dtype, device)
            return random_tensor((batch, seq or DEFAULT_SEQ, int(getattr(config, "feature_size", 80))), dtype, device)
        if name == "input_values":  # raw audio; wav2vec2's feature encoder strides by 320 samples
            return random_tensor((batch, 320 * (seq or DEFAULT_SEQ)), dtype, device)
        raise ModelError(f"hf:{self.model_type} ({self.cls_name}) takes {name} as its main input, which dispatchtrace "
                         "cannot make up; build the model and call it with inputs of your own")


def _text_config(config: Any, *, decoder: bool) -> Any:
    get = getattr(config, "get_text_config", None)
    try:
        return get(decoder=decoder) if get is not None else config
    except TypeError:
        return get()


def _positions(config: Any, *, decoder: bool) -> int | None:
    keys = ("max_target_positions",) if decoder else ()
    for key in (*keys, "max_position_embeddings", "n_positions", "max_source_positions"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def resolve(model_type: str, overrides: dict[str, Any], task: Task | None) -> HfModel:
    """``hf:TYPE`` with ``overrides`` and ``task`` checked: a ``ModelError`` says what is wrong and what to try."""
    tf = transformers()
    types = model_types()
    if model_type not in types:
        raise ModelError(f"unknown transformers model type {model_type!r}; {_suggest(model_type, types)}hf: takes a "
                         "model type (a default config with random weights, nothing downloaded), not a checkpoint "
                         "name; dispatchtrace.models.names('hf') lists them")
    default = tf.AutoConfig.for_model(model_type)
    takes = set(inspect.signature(type(default).__init__).parameters)
    generation = tf.GenerationConfig()  # decoder_start_token_id and kin: configs still take them
    unknown = [k for k in overrides if not (hasattr(default, k) or k in takes or hasattr(generation, k))]
    if unknown:
        common = set(tf.PretrainedConfig().to_dict())
        keys = sorted(k for k in default.to_dict() if k not in common)
        close = close_matches(unknown[0], keys)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ModelError(f"hf:{model_type}'s config ({type(default).__name__}) has no {unknown[0]!r}; {hint}"
                         f"its keys: {', '.join(keys[:12])}{', ...' if len(keys) > 12 else ''}")
    try:
        config = tf.AutoConfig.for_model(model_type, **overrides) if overrides else default
    except Exception as e:  # transformers' strict configs: a field of the wrong type, a value out of range
        reason = " ".join(line.strip() for line in str(e).splitlines() if line.strip()) or type(e).__name__
        given = " ".join(f"{k}={v!r}" for k, v in overrides.items())
        raise ModelError(f"hf:{model_type}'s config refused the overrides {given}: {reason}; check config= "
                         "(--config KEY=VALUE: values read as Python literals, num_hidden_layers=2 hidden_act='gelu')") from e
    has = tasks_of(model_type)
    if task is None:
        task = next((t for t in _DEFAULT_ORDER if t in has), None)
        if task is None:  # a part of a composite model (clip_text_model): its own class, as the base model
            own = _own_class(config)
            if own is None:
                raise ModelError(f"hf:{model_type} has no model class for any of {', '.join(TASKS)} in transformers' "
                                 f"auto classes, nor one of its own for {type(config).__name__}; build it with its class")
            return HfModel(model_type, config, "base", "", own)
    elif task not in TASKS:
        raise ModelError(f"unknown task {task!r}: use one of {', '.join(TASKS)}")
    elif task not in has:
        raise ModelError(f"hf:{model_type} has no {task} model; its tasks: {', '.join(has) or 'none'}")
    auto, mapping = next((a, m) for a, m in _AUTO[task] if model_type in _mapping(m))
    name = _mapping(mapping)[model_type]
    return HfModel(model_type, config, task, auto, name if isinstance(name, str) else name[0])


def _modeling_module(config: Any) -> Any:
    """``transformers.models.clip.modeling_clip`` for a ``configuration_clip`` config."""

    package, _, module = type(config).__module__.rpartition(".")
    return importlib.import_module(f"{package}.{module.replace('configuration_', 'modeling_', 1)}")


def _own_class(config: Any) -> str | None:
    """The model class of ``config``'s own modeling module that takes exactly this config (``CLIPTextModel``),
    preferring a name ending in ``Model``; ``None`` when there is none."""
    try:
        module = _modeling_module(config)
    except ImportError:
        return None
    found = [name for name, obj in vars(module).items() if isinstance(obj, type) and issubclass(obj, nn.Module)
             and getattr(obj, "config_class", None) is type(config) and not name.endswith("PreTrainedModel")
             and "forward" in _defined(obj)]
    found.sort(key=lambda n: (not n.endswith("Model"), len(n)))
    return found[0] if found else None


def _defined(cls: type) -> set[str]:
    """The names ``cls`` and its bases below ``nn.Module`` define (a class without a ``forward`` of its own cannot run)."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base is nn.Module:
            break
        names |= set(vars(base))
    return names


def _suggest(name: str, types: list[str]) -> str:
    guess = guess_type(name, types)
    close = [guess] if guess else close_matches(name.lower(), types)
    return f"did you mean {' or '.join(f'hf:{c}' for c in close)}? " if close else ""
