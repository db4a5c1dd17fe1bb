"""Stats kept on the device while the capture runs: rows of a buffer, read back once when it ends (no sync per op)."""

from __future__ import annotations

import math

import torch

from .._torch import modes_set_aside
from ..graph import Stats
from ._stats import _EMPTY, _F64, _flat, fingerprint_tensor

Tensor = torch.Tensor
_CHUNK = 1024
"""Rows per block of the buffer: it grows by a block, never copies the rows it holds."""
_COLUMNS = 9
"""``[nan, +inf, -inf, zeros, min, max, sum, norm, fingerprint]``: float64 (the sum 0 and the zeros -1 where not
asked for); the fingerprint's int64 bits as they are."""
DEFER_ON_CPU = False
"""Tests only: CPU tensors take the deferred path too (it is chosen for every other device), so CI runs its logic."""


class StatsRows:
    """Per device, blocks of ``_COLUMNS``-wide float64 rows on that device. ``add`` enqueues the reductions of
    one tensor on the current stream (the op's: later in-place writes and the allocator's reuse of the
    tensor's memory come after them) and writes their results into the next row, with no copy to the host;
    ``read`` brings every row to the host, once (a synchronisation per device), and makes the ``Stats``.

    The moments are taken over the finite elements and the counts always: no branch on a value (which would
    need the value on the host). Where the capture runs on several streams, ``read`` waits for the device."""

    def __init__(self, mean: bool, zeros: bool, fingerprint: bool) -> None:
        self._mean = mean
        self._zeros = zeros
        self._fingerprint = fingerprint
        self._blocks: dict[torch.device, list[Tensor]] = {}
        self._count: dict[torch.device, int] = {}
        self.rows: list[tuple[torch.device, int, int]] = []
        """Each row added: ``(device, row on it, numel)``; ``add`` returns its index here."""

    def add(self, t: Tensor) -> int | None:
        """Enqueue the reductions of ``t`` (a tensor with values) into a new row; its index, or ``None`` where
        its dtype takes no reduction."""
        n = t.numel()
        device = t.device
        try:
            with modes_set_aside():
                if n == 0:
                    self.rows.append((device, -1, 0))
                    return len(self.rows) - 1
                x = t.detach()
                fp = fingerprint_tensor(x).view(_F64).reshape(1) if self._fingerprint else None
                if not x.is_floating_point():
                    x = x.to(_F64)
                x = _flat(x)
                finite = torch.isfinite(x)
                inf = math.inf
                parts = [torch.isnan(x).sum(), (x == inf).sum(), (x == -inf).sum(),
                         (x == 0).sum() if self._zeros else torch.full((), -1, device=device)]
                clean = torch.where(finite, x, 0)
                parts += [torch.where(finite, x, inf).amin(), torch.where(finite, x, -inf).amax(),
                          clean.sum(dtype=_F64) if self._mean else torch.zeros((), device=device),
                          torch.linalg.vector_norm(clean, dtype=_F64)]
                row = torch.stack([p.to(_F64) for p in parts])
                if fp is not None:
                    row = torch.cat([row, fp])
                i = self._count.get(device, 0)
                blocks = self._blocks.setdefault(device, [])
                if i == len(blocks) * _CHUNK:
                    blocks.append(torch.full((_CHUNK, _COLUMNS), math.nan, dtype=_F64, device=device))
                blocks[i // _CHUNK][i % _CHUNK, :row.numel()].copy_(row)
                self._count[device] = i + 1
        except (RuntimeError, TypeError, NotImplementedError):  # a dtype a reduction does not take (float8)
            return None
        self.rows.append((device, i, n))
        return len(self.rows) - 1

    def read(self) -> list[Stats]:
        """The ``Stats`` of every row, in the order added: one copy to the host per device."""
        host: dict[torch.device, list[list[float]]] = {}
        fps: dict[torch.device, list[int]] = {}
        with modes_set_aside():
            for device, blocks in self._blocks.items():
                if device.type == "cuda":
                    torch.cuda.synchronize(device)  # rows written on other streams than the current one
                table = torch.cat(blocks)[: self._count[device]].cpu()
                host[device] = table.tolist()
                fps[device] = table[:, 8].contiguous().view(torch.int64).tolist()
        out = []
        for device, i, n in self.rows:
            if n == 0:
                out.append(_EMPTY)
                continue
            nan, posinf, neginf, zeros, lo, hi, s, norm, _ = host[device][i]
            fp = fps[device][i] if self._fingerprint else None
            bad = int(nan) + int(posinf) + int(neginf)
            z = int(zeros) if self._zeros else None
            if bad == n:
                out.append(Stats(n, int(nan), int(posinf), int(neginf), z, None, None, None, None, fp))
            else:
                out.append(Stats(n, int(nan), int(posinf), int(neginf), z, lo, hi, s / (n - bad) if self._mean else None,
                                 norm, fp))
        return out
