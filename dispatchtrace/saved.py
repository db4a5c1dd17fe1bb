"""Saved activations: which storages autograd saves for backward during a capture, and in which module call.

``SavedHooks`` pushes a ``torch.autograd.graph.saved_tensors_hooks`` pair for the capture block. The
pack hook notes the storage of each tensor autograd saves (once per storage: the first call that saved
it owns it) with its byte size, and hands autograd back what autograd keeps without hooks (the
tensor, or a detached alias of an output); unpack returns it unchanged. What the model computes does
not change, and no tensor is kept alive beyond what autograd keeps itself.

The private torch calls this leans on are all here: ``torch.autograd._get_sequence_nr`` and
``Node._sequence_nr`` (which saved tensor is an output of the node being built), and
``torch._C._autograd``'s ``_top_saved_tensors_default_hooks`` (hooks already set, to pass on to) and
``_saved_tensors_hooks_get_disabled_error_message`` (where hooks may not be set).

>>> import torch
>>> from dispatchtrace.graph import Graph
>>> g = Graph()
>>> hooks = SavedHooks([g.root], lambda key: 0)
>>> hooks.open()
True
>>> x = torch.ones(3, requires_grad=True)
>>> y = x.sigmoid()                      # sigmoid saves its result
>>> hooks.close()
>>> [(s.storage, s.bytes, s.call.label) for s in hooks.records()]
[(0, 12, '<capture>')]
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .graph import Saved

if TYPE_CHECKING:
    from .graph import Call

_graph_task_id = torch._C._current_graph_task_id
_next_sequence_nr = torch.autograd._get_sequence_nr
_detach = torch.ops.aten.detach.default
_free_weak_ref = torch.UntypedStorage._free_weak_ref


class SavedHooks:
    """Records what autograd saves on this thread while open, as the forward runs.

    ``stack`` is the capture's call stack (its last entry is the call running now); ``storage_id``
    maps a storage's address (``untyped_storage()._cdata``) to the capture's storage number, or
    ``None`` for a storage the capture never saw. Saves made while autograd runs backward
    (``create_graph=True``, a reentrant checkpoint's recomputation) are not the forward's and are
    not recorded; nor are saves under an inner ``saved_tensors_hooks`` (``torch.utils.checkpoint``
    without reentrancy, ``save_on_cpu``): the innermost pair of hooks is the one autograd calls.
    """

    __slots__ = ("_stack", "_storage_id", "_alias", "_thread", "_seen", "_hooks", "_outer", "_unpacked")

    def __init__(self, stack: list[Call], storage_id: Callable[[int], int | None],
                 alias: Callable[[torch.Tensor, torch.Tensor], None] | None = None) -> None:
        self._stack = stack
        self._storage_id = storage_id
        self._alias = alias
        self._unpacked: torch.Tensor | None = None
        self._thread = threading.get_ident()
        # storage address -> (raw weak ref pinning the address, freed by records(); bytes; the call that saved it first)
        self._seen: dict[int, tuple[int, int | None, Call]] = {}
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None
        self._outer: tuple[Callable[[torch.Tensor], Any], Callable[[Any], torch.Tensor]] | None = None

    def open(self) -> bool:
        """Push the hooks (``close`` pops them); ``False`` where saved-tensor hooks are disabled
        (inside ``torch.func.grad``), and nothing is recorded."""
        if torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is not None:
            return False
        # hooks already in place (an enclosing capture, save_on_cpu) keep working: ours pass on to them
        self._outer = torch._C._autograd._top_saved_tensors_default_hooks(False)
        hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        hooks.__enter__()
        self._hooks = hooks
        return True

    def close(self) -> None:
        """Pop the hooks; closing twice is harmless."""
        hooks, self._hooks = self._hooks, None
        self._unpacked = None
        if hooks is not None:
            hooks.__exit__(None, None, None)

    def _pack(self, t: torch.Tensor) -> Any:
        if _graph_task_id() == -1 and threading.get_ident() == self._thread and self._stack:
            try:
                st = t.untyped_storage()
                key = st._cdata
            except Exception:  # noqa: BLE001 - no storage (sparse, some subclasses): nothing to count
                key = None
            if key is not None and key not in self._seen:
                try:
                    n = st.nbytes()
                    nbytes = n if type(n) is int else None  # a symbolic size: the view falls back to shapes
                except Exception:  # noqa: BLE001
                    nbytes = None
                self._seen[key] = (st._weak_ref(), nbytes, self._stack[-1])
        outer = self._outer
        if outer is not None:
            return outer[0](t)
        try:
            version: int | None = t._version
        except Exception:  # noqa: BLE001 - no version counter
            version = None
        kept = _as_autograd_keeps(t)
        return kept, version, kept is t

    def _unpack(self, packed: Any) -> torch.Tensor:
        outer = self._outer
        if outer is not None:
            return outer[1](packed)
        t, version, original = packed
        if version is not None and t._version != version:
            # with hooks set, autograd leaves this check to them: it is autograd's own, message included
            raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an inplace "
                               f"operation: [{t.type()} {list(t.shape)}] is at version {t._version}; expected version "
                               f"{version} instead (checked by dispatchtrace's saved-tensor hooks, as autograd does)")
        if original and self._hooks is not None:
            self._unpacked = t
        return t

    def ours(self, func: Any, args: tuple[Any, ...], out: Any) -> bool:
        """Whether the op just run in backward is the ``aten.detach`` autograd runs on a tensor our unpack
        hook returned, and only because hooks are set: without them autograd hands its nodes the saved
        tensor itself. That op is not recorded, and its result is the saved tensor (``alias``), so the
        backward ops are the same with the hooks as without them."""
        t, self._unpacked = self._unpacked, None
        if t is None or func is not _detach or not args or args[0] is not t:
            return False
        if self._alias is not None and isinstance(out, torch.Tensor):
            self._alias(out, t)
        return True

    def records(self) -> list[Saved]:
        """One record per storage saved, in the order first saved; unpins the storages and forgets the
        capture (the hooks live on in autograd's graph, holding nothing of it). Called once."""
        out = [Saved(self._storage_id(key), nbytes, call) for key, (_, nbytes, call) in self._seen.items()]
        for weak, _, _ in self._seen.values():
            _free_weak_ref(weak)
        self._seen.clear()
        self._stack = []
        self._storage_id = _unknown
        return out


def _unknown(key: int) -> int | None:
    return None


def _as_autograd_keeps(t: torch.Tensor) -> torch.Tensor:
    """What autograd itself would keep for ``t``: the tensor, except for an output of the node being
    built (its ``grad_fn`` is the node made last on this thread), which it keeps detached.

    A hook handing back such an output as it is would make a cycle through C++ that no garbage
    collector breaks (output -> node -> saved output): the activations of every step would leak.
    Without hooks autograd detaches exactly these (``SavedVariable`` on a non-leaf output), and that
    ``aten.detach`` reaches the dispatch mode; the ``detach()`` here is the same op at the same
    point, so a capture records the same ops with the hooks as without them. One input looks like an
    output: the clone of ``self`` an in-place op saves (``hardswish_``, ``mul_``) was made after the
    op's node; ``clone`` itself saves nothing, so a saved tensor made last by ``clone`` is that input.
    """
    fn = t.grad_fn
    if fn is not None and fn._sequence_nr() == _next_sequence_nr() - 1 and type(fn).__name__ != "CloneBackward0":
        return t.detach()
    return t

