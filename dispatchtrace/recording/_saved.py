"""Saved activations: which storages autograd saves for backward during a capture, and in which module call.

``SavedHooks`` pushes a ``torch.autograd.graph.saved_tensors_hooks`` pair for the capture block. The
pack hook notes the storage of each tensor autograd saves (once per storage: the first call that saved
it owns it) with its byte size, and hands autograd back what autograd keeps without hooks (the
tensor, or a detached alias of an output); unpack returns it unchanged. What the model computes does
not change, and no tensor is kept alive beyond what autograd keeps itself.

Which saved tensors are outputs of the node being built is known exactly once that node is complete:
autograd announces each node it makes, after storing what it saves, to the
``torch.autograd.graph.node_creation_hook``s; the hooks keep each tensor saved since the last
announcement pending until then (see ``_Packed``). The private torch calls this leans on are all
here: ``torch.autograd._get_sequence_nr`` and ``Node._sequence_nr`` (what was saved after an in-place
op on a view made its ``CopySlices``), and ``torch._C._autograd``'s
``_top_saved_tensors_default_hooks`` (hooks already set, to pass on to) and
``_saved_tensors_hooks_get_disabled_error_message`` (where hooks may not be set).

On a torch without the node creation hook (before 2.14) which saved tensor is an output of its
node cannot be known, and a hook handing outputs back as they are would leak every step's
activations: ``open`` sets no hooks there, and ``g.saved`` is empty (the capture's note at its first
backward op, ``_torch.NO_NODE_CREATION_HOOK``, says so).

>>> import torch
>>> from dispatchtrace.graph import Graph
>>> g = Graph()
>>> from dispatchtrace._torch import NODE_CREATION_HOOK
>>> hooks = SavedHooks([g.root], lambda key: 0)
>>> hooks.open() == NODE_CREATION_HOOK
True
>>> x = torch.ones(3, requires_grad=True)
>>> y = x.sigmoid()                      # sigmoid saves its result
>>> hooks.close()
>>> [(s.storage, s.bytes, s.call.label) for s in hooks.records()] == ([(0, 12, '<capture>')] if NODE_CREATION_HOOK else [])
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .._torch import NODE_CREATION_HOOK, graph_task_id, node_creation_hook, saved_hooks_disabled, top_saved_hooks
from ..graph import Saved

if TYPE_CHECKING:
    from torch.autograd.graph import Node

    from ..graph import Call

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

    __slots__ = ("_stack", "_storage_id", "_alias", "_thread", "_seen", "_hooks", "_outer", "_unpacked",
                 "_made", "_pending")

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
        self._made: Any = None  # the entered torch.autograd.graph.node_creation_hook
        # thread -> what was saved there since autograd last announced a node (see ``_Packed``)
        self._pending: dict[int, list[_Packed]] = {}

    def open(self) -> bool:
        """Push the hooks (``close`` pops them); ``False`` where saved-tensor hooks are disabled
        (inside ``torch.func.grad``) or this torch cannot announce nodes (before 2.14), and nothing is recorded."""
        if not NODE_CREATION_HOOK or saved_hooks_disabled():
            return False
        # hooks already in place (an enclosing capture, save_on_cpu) keep working: ours pass on to them
        self._outer = top_saved_hooks()
        made = node_creation_hook(self._resolve)
        assert made is not None
        made.__enter__()
        self._made = made
        try:
            hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
            hooks.__enter__()
        except BaseException:
            self.close()
            raise
        self._hooks = hooks
        return True

    def close(self) -> None:
        """Pop the hooks; closing twice is harmless."""
        hooks, self._hooks = self._hooks, None
        made, self._made = self._made, None
        self._unpacked = None
        try:
            if hooks is not None:
                hooks.__exit__(None, None, None)
        finally:
            if made is not None:
                made.__exit__(None, None, None)
            for pending in self._pending.values():  # saved by no node (a checkpoint's inputs): inputs, kept as they are
                for p in pending:
                    p.fn = None
            self._pending.clear()

    def _pack(self, t: torch.Tensor) -> Any:
        if graph_task_id() == -1 and threading.get_ident() == self._thread and self._stack:
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
        packed = _Packed(t, version)
        fn = t.grad_fn
        if fn is not None:  # a leaf, or a tensor autograd does not track, is no node's output
            packed.fn = fn
            packed.seq = _next_sequence_nr()
            self._pending.setdefault(threading.get_ident(), []).append(packed)
        return packed

    def _resolve(self, node: Node) -> None:
        """``node`` is complete (the node-creation hook): each tensor saved since the last node was
        announced on this thread is an output of ``node`` or an input, and is kept as autograd keeps it."""
        pending = self._pending.get(threading.get_ident())
        if not pending or type(node).__name__ == "AccumulateGrad":  # made as a leaf is wired in, saves nothing
            return
        del self._pending[threading.get_ident()]
        rebased = type(node).__name__ == "CopySlices"
        made = node._sequence_nr()
        for p in pending:
            if p.fn is node or (rebased and p.seq > made):
                p.tensor = p.tensor.detach()
                p.original = False
            p.fn = None

    def _unpack(self, packed: Any) -> torch.Tensor:
        outer = self._outer
        if outer is not None:
            return outer[1](packed)
        t, version, original = packed.tensor, packed.version, packed.original
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


class _Packed:
    """What the pack hook hands autograd for one saved tensor: the tensor, or a detached alias of it once
    it is known to be an output of the node that saved it, which is what autograd itself keeps.

    A hook handing back such an output as it is would make a cycle through C++ that no garbage
    collector breaks (output -> node -> saved output): the activations of every step would leak.
    Without hooks autograd detaches exactly these (``SavedVariable`` with ``is_output`` on a non-leaf),
    and that ``aten.detach`` reaches the dispatch mode; the ``detach()`` here is the same op at the
    same point of the op stream (after the op, before its node is announced), so a capture records
    the same ops with the hooks as without them.

    Which node saved a tensor is not known while it is packed, only once the node is announced, and
    autograd announces each node right after storing what it saves: a tensor saved since the last
    announcement on its thread is an output of the announced node when its ``grad_fn`` is that node
    (``fn``; the op's result, an in-place op's ``self``, a custom ``Function``'s output), or, for the
    ``CopySlices`` an in-place op on a view is rebased on, when it was saved after that node was made
    (``seq``: the op's inputs are saved before the op runs, its output after). Anything else is an
    input (a custom ``Function``'s inputs, the clone of ``self`` an in-place op saves, a
    non-reentrant ``checkpoint``'s inputs, which no node saves) and stays as it is.
    """

    __slots__ = ("tensor", "version", "original", "fn", "seq")

    def __init__(self, tensor: torch.Tensor, version: int | None) -> None:
        self.tensor = tensor
        self.version = version
        self.original = True
        self.fn: Node | None = None
        self.seq = 0
