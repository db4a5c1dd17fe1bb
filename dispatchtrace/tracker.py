"""Tensor and storage identity during a capture: which ref a tensor is now, who wrote it last."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .tensors import Kind, TensorRef

if TYPE_CHECKING:
    from .graph import Op

Tensor = torch.Tensor


class StorageState:
    """One storage seen in the capture. Holding its weak ref pins the address: no reuse."""

    __slots__ = ("sid", "weak", "version", "writer")

    def __init__(self, sid: int, weak: StorageWeakRef | None) -> None:
        self.sid = sid
        self.weak = weak
        self.version = 0
        self.writer: Op | None = None


class TensorState:
    """One live tensor object: its current ref, storage, and the storage version it was born at."""

    __slots__ = ("wr", "ref", "storage", "born")

    def __init__(self, wr: weakref.ref[Tensor], ref: TensorRef, storage: StorageState, born: int) -> None:
        self.wr = wr
        self.ref = ref
        self.storage = storage
        self.born = born


_dtype_names: dict[torch.dtype, str] = {}
_device_names: dict[torch.device, str] = {}


def _meta(t: Tensor) -> tuple[tuple[int | str, ...], str, str]:
    try:
        shape = tuple(t.shape)
    except RuntimeError:  # nested tensors have no sizes: ragged dimensions are "*"
        shape = tuple(_size_or_star(t, i) for i in range(t.dim()))
    if type(t) is not Tensor and not all(type(s) is int for s in shape):  # symbolic sizes (fake tensors)
        shape = tuple(s if type(s) is int else str(s) for s in shape)
    dt = t.dtype
    dname = _dtype_names.get(dt)
    if dname is None:
        dname = _dtype_names[dt] = str(dt).removeprefix("torch.")
    dev = t.device
    devname = _device_names.get(dev)
    if devname is None:
        devname = _device_names[dev] = str(dev)
    return shape, dname, devname


def _size_or_star(t: Tensor, dim: int) -> int | str:
    try:
        return int(t.size(dim))
    except RuntimeError:
        return "*"


Namer = Callable[[Tensor], "tuple[Kind, str | None]"]


class Tracker:
    """Maps live tensors to refs. ``namer`` classifies a tensor seen for the first time."""

    def __init__(self, namer: Namer) -> None:
        self._namer = namer
        self._storages: dict[int, StorageState] = {}
        self._tensors: dict[int, TensorState] = {}
        self._next_ref = 0
        self._next_sid = 0
        self.external: list[TensorRef] = []

    def close(self) -> None:
        """Drop every weak reference; the refs already handed out stay valid."""
        self._storages.clear()
        self._tensors.clear()

    def _storage(self, t: Tensor) -> StorageState:
        try:
            st = t.untyped_storage()
        except Exception:  # tensors without storage (sparse, some subclasses): one per object
            self._next_sid += 1
            return StorageState(self._next_sid - 1, None)
        cdata = st._cdata
        state = self._storages.get(cdata)
        if state is None:
            self._next_sid += 1
            state = self._storages[cdata] = StorageState(self._next_sid - 1, StorageWeakRef(st))
        return state

    def _new_ref(self, t: Tensor, storage: StorageState, producer: Op | None, kind: Kind, name: str | None,
                 slot: int = 0) -> TensorRef:
        shape, dtype, device = _meta(t)
        self._next_ref += 1
        return TensorRef(self._next_ref - 1, shape, dtype, device, storage.sid, storage.version, producer, kind, name,
                         slot)

    def known(self, t: Tensor) -> TensorState:
        """The state of ``t`` as last recorded (its ref not refreshed); first sight makes an external ref."""
        s = self._tensors.get(id(t))
        if s is not None and s.wr() is t:
            return s
        storage = self._storage(t)
        kind, name = self._namer(t)
        ref = self._new_ref(t, storage, None, kind, name)
        self.external.append(ref)
        s = self._tensors[id(t)] = TensorState(weakref.ref(t), ref, storage, storage.version)
        return s

    def refreshed(self, t: Tensor) -> TensorState:
        """The state of ``t`` with its ref made again (same producer and slot, new version) when its
        storage was written since the ref was made."""
        s = self._tensors.get(id(t))
        if s is None or s.wr() is not t:
            s = self.known(t)
        ref = s.ref
        if ref.version != s.storage.version:
            s.ref = self._new_ref(t, s.storage, ref.producer, ref.kind, ref.name, ref.slot)
        return s

    def ref_of(self, t: Tensor) -> TensorRef:
        """The ref of ``t`` as of now (``refreshed(t).ref``)."""
        return self.refreshed(t).ref

    def produced(self, t: Tensor, op: Op, written: bool, slot: int = 0) -> TensorRef:
        """Record ``t`` as an output of ``op`` (a new tensor, a view, or the tensor it wrote)."""
        s = self._tensors.get(id(t)) if written else None
        if s is not None and s.wr() is t:
            # written in place and returned: the same tensor object (a buffer stays a buffer)
            storage, kind, name = s.storage, s.ref.kind, s.ref.name
        else:
            storage, kind, name = self._storage(t), "activation", None
        ref = self._new_ref(t, storage, op, kind, name, slot)
        self._tensors[id(t)] = TensorState(weakref.ref(t), ref, storage, storage.version)
        return ref

    def write(self, t: Tensor, op: Op) -> StorageState:
        """``op`` writes ``t``'s storage: a new version, and ``op`` becomes its last writer."""
        storage = self.known(t).storage
        storage.version += 1
        storage.writer = op
        return storage
