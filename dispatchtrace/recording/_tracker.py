"""Tensor and storage identity during a capture: which ref a tensor is now, who wrote it last."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .._torch import collective_result
from ..graph import Kind, TensorRef
from ._region import Region, covers, meets, region, subtract

if TYPE_CHECKING:
    from ..graph import Op

Tensor = torch.Tensor
Parameter = torch.nn.Parameter


Write = tuple[Region, int, "Op"]
"""``(region, version, op)``: ``op`` wrote the bytes ``region`` covers of a storage (``_region``), making ``version``."""


class StorageState:
    """One storage seen in the capture, found by its address ``key`` (``untyped_storage()._cdata``).

    ``obj`` is a Python weak reference to the storage's Python object, which PyTorch keeps for
    exactly as long as the storage lives (it hands back the same object while the storage lives:
    PyObject preservation), so the ref dies with the storage and an address the allocator gives to a
    new storage is seen as a new storage (``obj() is not`` the object found there). It pins
    nothing: a C++ weak ref (``UntypedStorage._weak_ref``) would keep each dead storage's record
    allocated until the block ends, among the tensors' memory (on CPU, thousands of page faults per
    ResNet-50 capture in some processes). ``writes`` are the writes that may still be the last write
    of some byte, oldest first: a write whose bytes a later write covers is dropped (an empty tuple
    until the first write: most storages are never written in place).
    """

    __slots__ = ("sid", "obj", "key", "version", "writes")

    def __init__(self, sid: int, obj: weakref.ref[Any] | None = None, key: int | None = None) -> None:
        self.sid = sid
        self.obj = obj
        self.key = key
        self.version = 0
        self.writes: list[Write] | tuple[()] = ()

    @property
    def writer(self) -> Op | None:
        """The op that wrote this storage last, if any."""
        return self.writes[-1][2] if self.writes else None


def _key(t: Tensor) -> int | None:
    try:
        return int(t.untyped_storage()._cdata)
    except Exception:  # noqa: BLE001 - no storage
        return None


class TensorState(weakref.ref):  # type: ignore[type-arg]
    """One live tensor object: a weak ref to it (call the state: ``state() is t``) with its current ref,
    storage, and the storage version it was born at: one object, made with no Python call."""

    __slots__ = ("ref", "storage", "born")
    ref: TensorRef
    storage: StorageState
    born: int


_dtype_names: dict[torch.dtype, str] = {}
_device_names: dict[torch.device, str] = {}


def _shape(t: Tensor) -> tuple[int | str, ...]:
    """The shape of ``t`` as ``TensorRef.shape`` holds it: ints, symbolic sizes as text."""
    try:
        shape = tuple(t.shape)
    except RuntimeError:  # nested tensors have no sizes: ragged dimensions are "*"
        shape = tuple(_size_or_star(t, i) for i in range(t.dim()))
    if type(t) is not Tensor:  # symbolic sizes (fake tensors)
        for s in shape:
            if type(s) is not int:
                return tuple(s if type(s) is int else str(s) for s in shape)
    return shape


def _size_or_star(t: Tensor, dim: int) -> int | str:
    try:
        return int(t.size(dim))
    except RuntimeError:
        return "*"


Namer = Callable[[Tensor], "tuple[Kind, str | None]"]


class Tracker:
    """Maps live tensors to refs. ``namer`` classifies a tensor seen for the first time; ``named``
    (``id -> (tensor, kind, name)``, as ``names.Names.by_id`` keeps the model's parameters and buffers)
    is read first, inline, so a parameter met for the first time costs no call to ``namer``."""

    def __init__(self, namer: Namer, named: dict[int, tuple[Tensor, str, str]] | None = None) -> None:
        self._namer = namer
        self._named = named if named is not None else {}
        self._storages: dict[int, StorageState] = {}
        self._tensors: dict[int, TensorState] = {}
        self.live = self._tensors
        """``id(tensor) -> TensorState`` (check ``state() is tensor``): read inline by ``Recorder.op``."""
        self._next_ref = 0
        self._next_sid = 0
        self._shapes: dict[tuple[int | str, ...], tuple[int | str, ...]] = {}
        self.inputs: list[TensorRef] = []
        """The refs first seen of kind ``input`` (the graph's inputs), in the order seen."""

    def close(self) -> None:
        """Forget every tensor and storage; the refs already handed out stay valid. A second call does nothing."""
        self._storages.clear()
        self._tensors.clear()
        self._shapes.clear()

    def storage_id(self, key: int) -> int | None:
        """The number of the storage at address ``key`` (``untyped_storage()._cdata``), if seen (the
        storage living there now, or the last one that did)."""
        state = self._storages.get(key)
        return None if state is None else state.sid

    def alias(self, new: Tensor, old: Tensor) -> None:
        """``new`` is ``old`` under another tensor object (autograd's copy of a saved tensor it
        unpacked): it gets ``old``'s ref, as the same tensor would."""
        s = self._tensors.get(id(old))
        if s is not None and s() is old:
            state = self._tensors[id(new)] = TensorState(new)
            state.ref, state.storage, state.born = s.ref, s.storage, s.born

    def _storage(self, t: Tensor) -> StorageState:
        try:
            st = t.untyped_storage()
        except Exception:  # tensors without storage (sparse, some subclasses): one per object
            self._next_sid += 1
            return StorageState(self._next_sid - 1)
        cdata = st._cdata
        state = self._storages.get(cdata)
        if state is None or state.obj() is not st:  # not seen, or a dead storage's address reused
            self._next_sid += 1
            state = self._storages[cdata] = StorageState(self._next_sid - 1, weakref.ref(st), cdata)
        return state

    def _new_ref(self, t: Tensor, storage: StorageState, producer: Op | None, kind: Kind, name: str | None,
                 slot: int = 0) -> TensorRef:
        shape = None
        if type(t) is Tensor or type(t) is Parameter:
            try:
                size = t.shape
            except RuntimeError:  # nested
                pass
            else:  # a Size hashes and compares as its tuple: a shape met before is found with no tuple made
                shape = self._shapes.get(size)
                if shape is None:
                    shape = self._shapes[size] = tuple(size)
        if shape is None:
            shape = _shape(t)
            shape = self._shapes.setdefault(shape, shape)  # equal shapes are one tuple per capture
        try:
            dtype = _dtype_names[t.dtype]
        except KeyError:
            dtype = _dtype_names[t.dtype] = str(t.dtype).removeprefix("torch.")
        try:
            device = _device_names[t.device]
        except KeyError:
            device = _device_names[t.device] = str(t.device)
        self._next_ref += 1
        return TensorRef(self._next_ref - 1, shape, dtype, device, storage.sid, storage.version, producer, kind, name,
                         slot)

    def known(self, t: Tensor) -> TensorState:
        """The state of ``t`` as last recorded (its ref not refreshed); first sight makes an external ref
        (no producer), of the kind and name ``named`` or ``namer`` gives."""
        s = self._tensors.get(id(t))
        if s is not None and s() is t:
            return s
        if type(t) is not Tensor and type(t) is not Parameter:
            inner = collective_result(t)
            if inner is not None:  # a collective's result wrapped where no mode saw it: it is its result
                i = self.known(inner)
                s = self._tensors[id(t)] = TensorState(t)
                s.ref, s.storage, s.born = i.ref, i.storage, i.born
                return s
        storage = self._storage(t)
        entry = self._named.get(id(t))
        if entry is not None and entry[0] is t:
            kind, name = entry[1], entry[2]
        else:
            kind, name = self._namer(t)
        ref = self._new_ref(t, storage, None, kind, name)  # type: ignore[arg-type]
        if kind == "input":
            self.inputs.append(ref)
        s = self._tensors[id(t)] = TensorState(t)
        s.ref, s.storage, s.born = ref, storage, storage.version
        return s

    def refreshed(self, t: Tensor) -> TensorState:
        """The state of ``t`` with its ref made again (same producer and slot, new version) when its
        storage was written since the ref was made."""
        s = self._tensors.get(id(t))
        if s is None or s() is not t:
            s = self.known(t)
        ref = s.ref
        if ref.version != s.storage.version:
            s.ref = self._new_ref(t, s.storage, ref.producer, ref.kind, ref.name, ref.slot)
        return s

    def ref_of(self, t: Tensor) -> TensorRef:
        """The ref of ``t`` as of now (``refreshed(t).ref``)."""
        s = self._tensors.get(id(t))
        if s is not None and s.ref.version == s.storage.version and s() is t:
            return s.ref
        return self.refreshed(t).ref

    def refs(self, tensors: list[Tensor]) -> list[TensorRef]:
        """``[ref_of(t) for t in tensors]``, without a call per tensor already known and unwritten."""
        live = self._tensors
        out = []
        for t in tensors:
            s = live.get(id(t))
            if s is not None and s.ref.version == s.storage.version and s() is t:
                out.append(s.ref)
            else:
                out.append(self.refreshed(t).ref)
        return out

    def produced(self, t: Tensor, op: Op, written: bool, slot: int = 0) -> TensorRef:
        """Record ``t`` as an output of ``op`` (a new tensor, a view, or the tensor it wrote)."""
        s = self._tensors.get(id(t)) if written else None
        if s is not None and s() is t:
            # written in place and returned: the same tensor object (a buffer stays a buffer)
            storage, kind, name = s.storage, s.ref.kind, s.ref.name
        else:
            kind, name = "activation", None
            try:  # _storage(t), inline: once per op output
                st = t.untyped_storage()
                cdata = st._cdata
            except Exception:  # noqa: BLE001 - no storage: _storage makes one for this object
                storage = self._storage(t)
            else:
                storage = self._storages.get(cdata)  # type: ignore[assignment]
                if storage is None or storage.obj() is not st:
                    self._next_sid += 1
                    storage = self._storages[cdata] = StorageState(self._next_sid - 1, weakref.ref(st), cdata)
        ref = None
        if type(t) is Tensor:  # _new_ref, inline: once per op output
            try:
                size = t.shape
                dtype = _dtype_names[t.dtype]
                device = _device_names[t.device]
            except (RuntimeError, KeyError):  # nested (no sizes), a dtype or device not named yet: _new_ref
                pass
            else:
                shape = self._shapes.get(size)
                if shape is None:
                    shape = self._shapes[size] = tuple(size)
                n = self._next_ref
                self._next_ref = n + 1
                ref = TensorRef(n, shape, dtype, device, storage.sid, storage.version, op, kind, name, slot)
        if ref is None:
            ref = self._new_ref(t, storage, op, kind, name, slot)
        state = self._tensors[id(t)] = TensorState(t)
        state.ref, state.storage, state.born = ref, storage, storage.version
        return ref

    def write(self, t: Tensor, op: Op) -> StorageState:
        """``op`` wrote ``t`` (called after it ran): a new version of ``t``'s storage, with the bytes
        ``t`` covers (``_region.region``) written by ``op``. When ``t`` now views another storage (``aten.set_``),
        ``t`` moves to that storage, which gets a new version with no byte written."""
        s = self.known(t)
        storage = s.storage
        if storage.key is not None and op.target.startswith("aten.set_"):
            try:
                moved = t.untyped_storage()._cdata != storage.key
            except Exception:  # noqa: BLE001 - a storage that is gone: t wrote its own
                moved = False
            if moved:
                storage = s.storage = self._storage(t)
                storage.version += 1
                s.born = storage.version
                return storage
        storage.version += 1
        r = region(t)
        if r[1] > r[0]:
            writes = storage.writes
            if writes:
                writes = [w for w in writes if not covers(r, w[0])]
            storage.writes = [*writes, (r, storage.version, op)]
        return storage

    @staticmethod
    def writers(t: Tensor, s: TensorState, view: Any = None) -> list[Op]:
        """The ops that last wrote some byte ``t`` covers, after ``t`` was born (``s``: its state),
        newest first: the writes a read of ``t`` depends on besides its producer. ``view``: the
        result of a view op reading ``t`` (a tensor or a list), which reads only the bytes it covers."""
        born = s.born
        writes = s.storage.writes
        if not writes or writes[-1][1] <= born:
            return []
        key = s.storage.key
        views = [v for v in (view if isinstance(view, (list, tuple)) else (view,))
                 if isinstance(v, Tensor) and key is not None and _key(v) == key]
        left: list[Region] = [r for r in (map(region, views) if views else (region(t),)) if r[1] > r[0]]
        out: list[Op] = []
        for w, version, op in reversed(writes):
            if version <= born or not left:
                break
            rest: list[Region] = []
            hit = False
            for r in left:
                if meets(r, w):  # these bytes' last writer is found: older writes of them are not read
                    hit = True
                    rest += subtract(r, w)
                else:
                    rest.append(r)
            if hit and op not in out:
                out.append(op)
            left = rest
        return out
