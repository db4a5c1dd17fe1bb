"""``ModuleState``: a module tree's attributes, tensors and generators as they are now, to put back later."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn as nn

from .._torch import has_values

_CONTAINERS = (list, dict, set)


class ModuleState:
    """What ``restore`` puts back into every module of ``model``: each attribute's object (a tensor,
    a flag, a list, a submodule), the contents of list, dict and set attributes (``_parameters``,
    ``_buffers`` and ``_modules`` among them), the values of every tensor found there (parameters,
    buffers, plain tensor attributes, tensors in tuples) and the state of every ``torch.Generator`` attribute.

    Attributes added after the snapshot are removed. A tensor whose version counter and values
    are as saved is left alone, so autograd graphs that saved it stay valid. Objects held in
    attributes keep their identity but not their own fields (a cache object's contents).

    >>> m = torch.nn.BatchNorm1d(2).train()
    >>> state = ModuleState(m)
    >>> _ = m(torch.randn(4, 2)); m.ready = True
    >>> state.restore()
    >>> int(m.num_batches_tracked), float(m.running_mean.abs().sum()), hasattr(m, "ready")
    (0, 0.0, False)
    """

    def __init__(self, model: nn.Module) -> None:
        self._dicts: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._contents: list[tuple[Any, Any]] = []
        self._tensors: list[list[Any]] = []  # [tensor, clone, version at the last restore]
        self._by_id: dict[int, torch.Tensor] = {}
        self._generators: list[tuple[torch.Generator, torch.Tensor]] = []
        self._seen: set[int] = set()
        for module in model.modules():
            self._dicts.append((module.__dict__, dict(module.__dict__)))
            for value in module.__dict__.values():
                self._take(value, 0)
        del self._seen

    def _take(self, value: Any, depth: int) -> None:
        if id(value) in self._seen or isinstance(value, nn.Module) or depth > 4:
            return
        self._seen.add(id(value))
        if isinstance(value, torch.Tensor):
            if not isinstance(value, nn.parameter.UninitializedTensorMixin):
                saved = value.detach().clone()
                self._tensors.append([value, saved, _version(value)])
                self._by_id[id(value)] = saved
        elif isinstance(value, torch.Generator):
            self._generators.append((value, value.get_state()))
        elif isinstance(value, _CONTAINERS):
            saved = list(value) if isinstance(value, list) else set(value) if isinstance(value, set) else dict(value)
            self._contents.append((value, saved))
            for v in (value.values() if isinstance(value, dict) else value):
                self._take(v, depth + 1)
        elif isinstance(value, tuple):  # immutable: its tensors' values only
            for v in value:
                self._take(v, depth + 1)

    def saved(self, t: torch.Tensor) -> torch.Tensor | None:
        """The value ``t`` had when the snapshot was taken, if it is one of the model's tensors."""
        return self._by_id.get(id(t))

    def restore(self) -> None:
        """Put everything back as it was when the snapshot was taken."""
        for current, saved in self._dicts:
            for key in [k for k in current if k not in saved]:
                del current[key]
            current.update(saved)
        for container, items in self._contents:
            if isinstance(container, list):
                container[:] = items
            else:
                container.clear()
                container.update(items)
        for entry in self._tensors:
            t, saved, version = entry
            if _version(t) == version and _same(t, saved):
                continue
            _put_back(t, saved)
            entry[2] = _version(t)
        for generator, state in self._generators:
            generator.set_state(state)


def _put_back(t: torch.Tensor, saved: torch.Tensor) -> None:
    """Write ``saved`` into ``t`` whatever grad and inference mode the caller runs in: an inference
    tensor is written inside ``inference_mode`` (the only place it may be), any other tensor outside
    it, and both under ``no_grad`` innermost, since ``inference_mode(False)`` turns grad mode back on
    (a leaf that requires grad may not be written in place with grad mode on)."""
    with torch.inference_mode() if t.is_inference() else _outside_inference(), torch.no_grad():
        if t.shape == saved.shape and t.dtype == saved.dtype and t.stride() == saved.stride():
            t.copy_(saved)
        else:  # resized or re-set in place: take a copy of the saved one
            t.set_(saved.clone())


@contextmanager
def _outside_inference() -> Iterator[None]:
    """Out of ``inference_mode`` if the caller is in it (a normal tensor's version counter is bumped
    by the write, which inference mode does not allow for tensors made outside it), else nothing."""
    if torch.is_inference_mode_enabled():
        with torch.inference_mode(False):
            yield
    else:
        yield


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # inference tensors keep no version counter
        return None


def _same(t: torch.Tensor, saved: torch.Tensor) -> bool:
    """Unchanged values (a write through ``.data`` or numpy bumps no version counter)."""
    if not has_values(t):
        return t.shape == saved.shape and t.stride() == saved.stride()
    return t.shape == saved.shape and t.dtype == saved.dtype and bool(torch.equal(t, saved))


class Runs:
    """Every run starts from the module state and random state verify found (CPU and, once
    initialized, CUDA generators); the model is put back after each run, even when it raises."""

    def __init__(self, model: nn.Module) -> None:
        self.state = ModuleState(model)
        self._cpu = torch.get_rng_state()
        self._cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def _reset_random(self) -> None:
        torch.set_rng_state(self._cpu)
        if self._cuda is not None:
            torch.cuda.set_rng_state_all(self._cuda)

    @contextmanager
    def run(self) -> Iterator[None]:
        self._reset_random()
        try:
            yield
        finally:
            self.state.restore()

    def close(self) -> None:
        """The random state as verify found it (as ``torch.random.fork_rng`` leaves it)."""
        self._reset_random()
