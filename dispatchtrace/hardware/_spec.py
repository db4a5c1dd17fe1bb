"""DeviceSpec: what one accelerator can do (dense peaks per dtype, bandwidth, launch overhead, efficiency, links)."""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import SpecError
from ._efficiency import OP_CLASSES, Efficiency
from ._fresh import FreshOutput
from ._link import Link

#: dtype names a spec's ``peak_flops`` may hold: torch's spelling without ``torch.``, plus ``tfloat32`` (the
#: float32 matmul rate on TF32 tensor cores, used only when asked for)
DTYPES = (
    "float64", "float32", "tfloat32", "bfloat16", "float16",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "int8",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """What one accelerator (or this machine's CPU, measured) can do: the numbers an estimate is made from.

    ``peak_flops`` maps a dtype name (``"bfloat16"``) to the DENSE FLOP/s of that dtype's matmul (never the
    2:4-sparsity figure NVIDIA's tables star); ``memory_bandwidth`` is in bytes/s, ``launch_overhead`` the
    seconds one op costs however small (a kernel launch, or the CPU's dispatch); ``compute_efficiency`` and
    ``memory_efficiency`` the fraction of the peak and of the bandwidth each op class reaches by its size (a
    class without a curve uses ``"other"``'s; without that, the roofline itself). ``memory`` is the device's
    bytes, ``intra_node``/``inter_node`` the links per rank and direction, ``sources`` where each number
    comes from (field name, or ``"field.key"``, to a datasheet title or ``"measured by ..."``).

    >>> spec = DeviceSpec(name="toy", peak_flops={"float32": 1e12}, memory_bandwidth=1e11, launch_overhead=5e-6,
    ...                   compute_efficiency={"matmul": Efficiency(points=((1e6, 0.1), (1e10, 0.8)))})
    >>> spec.peak("float32"), spec.peak("torch.float32"), spec.peak("bfloat16")
    (1000000000000.0, 1000000000000.0, None)
    >>> spec.efficiency("matmul", flops=1e10, nbytes=1e6)    # (compute, memory); no memory curve: 1.0
    (0.8, 1.0)
    >>> DeviceSpec.from_dict(spec.to_dict()) == spec
    True
    >>> DeviceSpec(name="toy", peak_flops={"fp32": 1e12}, memory_bandwidth=1e11, launch_overhead=0)
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.SpecError: peak_flops takes dtype names as torch spells them ('float32', 'bfloat16', ...), not 'fp32' (did you mean 'float32'?)
    """

    name: str
    title: str = ""
    peak_flops: Mapping[str, float]
    memory_bandwidth: float
    launch_overhead: float
    compute_efficiency: Mapping[str, Efficiency] = field(default_factory=dict)
    memory_efficiency: Mapping[str, Efficiency] = field(default_factory=dict)
    kernel_efficiency: Mapping[str, Efficiency] = field(default_factory=dict)
    fresh_output: FreshOutput | None = None
    attention_dropout_fused: bool = True
    memory: float | None = None
    intra_node: Link | None = None
    inter_node: Link | None = None
    ranks_per_node: int = 1
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"name takes a non-empty string, not {self.name!r}")
        if not isinstance(self.title, str):
            raise SpecError(f"title takes a string, not {self.title!r}")
        peaks = _mapping(self.peak_flops, "peak_flops")
        if not peaks:
            raise SpecError("peak_flops takes at least one dtype's rate ({'float32': 1e12, ...}), not none")
        for key, value in peaks.items():
            if key not in DTYPES:
                raise SpecError(f"peak_flops takes dtype names as torch spells them ('float32', 'bfloat16', ...), "
                                f"not {key!r}{_did_you_mean(key, DTYPES, _DTYPE_ALIASES)}")
            _positive(value, f"peak_flops[{key!r}]", "a positive number of FLOP/s")
        _positive(self.memory_bandwidth, "memory_bandwidth", "a positive number of bytes per second")
        _positive(self.launch_overhead, "launch_overhead", "a number of seconds >= 0", zero=True)
        if self.memory is not None:
            _positive(self.memory, "memory", "a positive number of bytes (or null)")
        for name in ("compute_efficiency", "memory_efficiency"):
            curves = _mapping(getattr(self, name), name)
            for key, curve in curves.items():
                if key not in OP_CLASSES:
                    raise SpecError(f"{name} takes op classes ({', '.join(OP_CLASSES)}), not {key!r}"
                                    f"{_did_you_mean(key, OP_CLASSES)}")
                if not isinstance(curve, Efficiency):
                    raise SpecError(f"{name}[{key!r}] takes an Efficiency, not {type(curve).__name__}")
            object.__setattr__(self, name, MappingProxyType(dict(curves)))
        kernels = _mapping(self.kernel_efficiency, "kernel_efficiency")
        for key, curve in kernels.items():
            if not key or not isinstance(curve, Efficiency):
                raise SpecError(f"kernel_efficiency takes ATen kernel names ('gelu') to an Efficiency, not {key!r}: "
                                f"{type(curve).__name__}")
        object.__setattr__(self, "kernel_efficiency", MappingProxyType(dict(kernels)))
        if not isinstance(self.attention_dropout_fused, bool):
            raise SpecError(f"attention_dropout_fused takes true or false, not {self.attention_dropout_fused!r}")
        if self.fresh_output is not None and not isinstance(self.fresh_output, FreshOutput):
            raise SpecError(f"fresh_output takes a FreshOutput (or None), not {type(self.fresh_output).__name__}")
        for name in ("intra_node", "inter_node"):
            link = getattr(self, name)
            if link is not None and not isinstance(link, Link):
                raise SpecError(f"{name} takes a Link (or None), not {type(link).__name__}")
        if isinstance(self.ranks_per_node, bool) or not isinstance(self.ranks_per_node, int) or self.ranks_per_node < 1:
            raise SpecError(f"ranks_per_node takes a whole number >= 1, not {self.ranks_per_node!r}")
        sources = _mapping(self.sources, "sources")
        for key, value in sources.items():
            if not isinstance(value, str):
                raise SpecError(f"sources[{key!r}] takes a string, not {value!r}")
        object.__setattr__(self, "peak_flops", MappingProxyType({k: float(v) for k, v in peaks.items()}))
        object.__setattr__(self, "sources", MappingProxyType(dict(sources)))

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __reduce__(self) -> tuple[Any, ...]:  # pickle and deepcopy through JSON's values (mappingproxy pickles not)
        return (_from_dict, (self.to_dict(),))

    def __repr__(self) -> str:
        from ._describe import _si

        rates = [(self.peak_flops[k], k) for k in ("bfloat16", "float32", "float16") if k in self.peak_flops]
        rate, dtype = max(rates or [(v, k) for k, v in self.peak_flops.items()], key=lambda r: r[0])
        return (f"DeviceSpec({self.name!r}: {_si(rate)}FLOP/s {dtype}, {_si(self.memory_bandwidth)}B/s, "
                f"launch {self.launch_overhead * 1e6:.3g} us)")

    def __str__(self) -> str:
        from ._describe import describe

        return describe(self)

    # -- reading ---------------------------------------------------------------------------------------

    def peak(self, dtype: object) -> float | None:
        """The dense FLOP/s of ``dtype`` (a name, ``"torch.bfloat16"`` or a ``torch.dtype``); ``None`` when the
        device has no such rate. A float8 the spec does not list takes the spec's float8 rate (NVIDIA's tables
        give one FP8 figure for both formats; AMD's MI300X runs the ``fnuz`` variants)."""
        key = str(dtype).removeprefix("torch.")
        key = _DTYPE_ALIASES.get(key, key)
        rate = self.peak_flops.get(key)
        if rate is None and key.startswith("float8"):
            rates = [v for k, v in self.peak_flops.items() if k.startswith("float8")]
            rate = max(rates) if rates else None
        return rate

    def efficiency(self, op_class: str, *, flops: float | None, nbytes: float | None,
                   shape: float | None = None, kernel: str | None = None) -> tuple[float, float]:
        """``(compute, memory)``: the fractions of the peak and of the bandwidth an op of ``op_class`` with
        ``flops`` FLOPs and ``nbytes`` bytes moved reaches (1.0 where the size is ``None`` or no curve applies);
        ``shape`` (a matmul's smallest GEMM dimension, a convolution's output positions) picks the rows of a
        curve with a shape axis (``Efficiency.by_shape``); ``kernel`` (the ATen name, ``"gelu"``) reads the
        kernel's own memory curve where the spec has one."""
        if op_class not in OP_CLASSES:
            raise SpecError(f"an op class is one of {', '.join(OP_CLASSES)}, not {op_class!r}"
                            f"{_did_you_mean(str(op_class), OP_CLASSES)}")
        own = self.kernel_efficiency.get(kernel) if kernel is not None else None
        memory = (own.at(nbytes) if nbytes is not None else 1.0) if own is not None else \
            _fraction(self.memory_efficiency, op_class, nbytes, shape)
        return _fraction(self.compute_efficiency, op_class, flops, shape), memory

    def fresh_seconds(self, nbytes: float) -> float:
        """Seconds an output of ``nbytes`` allocated anew costs beyond its bytes moved (0.0 without
        ``fresh_output``)."""
        return 0.0 if self.fresh_output is None else self.fresh_output.seconds(nbytes)

    # -- JSON ------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able values (what ``save`` writes)."""
        from ._json import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, data: object, *, where: str = "device spec") -> DeviceSpec:
        """A spec from ``to_dict``'s values, every field checked: a wrong one is a one-line ``SpecError``
        that names the field and what it takes (``where`` starts the message: a file's path)."""
        from ._json import from_dict

        return from_dict(data, where)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the spec as JSON to ``path`` (``.json``)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DeviceSpec:
        """Read a spec ``save`` or ``dispatchtrace calibrate`` wrote; anything wrong is a one-line ``SpecError``."""
        from ._json import load

        return load(path)

    # -- built-ins -------------------------------------------------------------------------------------

    @classmethod
    def named(cls, name: str) -> DeviceSpec:
        """A built-in spec by name (``"h100-sxm"``) or alias (``"h100"``); an unknown name is a ``SpecError``
        that suggests close ones.

        >>> DeviceSpec.named("h100").name
        'h100-sxm'
        >>> DeviceSpec.named("h10-sxm")
        Traceback (most recent call last):
        ...
        dispatchtrace.errors.SpecError: no built-in device spec 'h10-sxm' (did you mean 'h100-sxm'?); the built-ins are a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, b200, mi300x, l4, or give a path to a spec JSON (dispatchtrace calibrate -o spec.json measures this machine)
        """
        from ._builtin import named

        return named(name)

    @staticmethod
    def names() -> tuple[str, ...]:
        """The built-in specs' names."""
        from ._builtin import BUILT_IN

        return tuple(BUILT_IN)

    @classmethod
    def calibrate(cls, device: object = None, *, threads: int | None = None, quick: bool = False,
                  repeat: int | None = None, name: str | None = None, log: Callable[[str], None] | None = None,
                  ) -> DeviceSpec:
        """Measure the device at hand (``"cpu"``, ``"cuda"``; default CUDA when there is one): matmul per dtype,
        convolutions (3x3 and 1x1), SDPA, memory-bound kernels (elementwise, copies, reductions) at several sizes and the
        per-op overhead, into a spec whose efficiency curves come from the measurement (``dispatchtrace
        calibrate``; CUDA events on a GPU, the wall clock on the CPU with ``threads`` threads, by default
        torch's current number). ``quick`` runs fewer sizes; ``log`` gets one line per kernel measured."""
        from ._calibrate import calibrate

        return calibrate(device, threads=threads, quick=quick, repeat=repeat, name=name, log=log)  # type: ignore[arg-type]

    @classmethod
    def for_device(cls, device_name: str | None = None) -> DeviceSpec | None:
        """The built-in spec of the part a CUDA/ROCm device name reports (``torch.cuda.get_device_name()``:
        ``"NVIDIA H100 80GB HBM3"`` is ``h100-sxm``), or ``None`` for a part without one. ``None`` reads the
        current CUDA device's name.

        >>> DeviceSpec.for_device("NVIDIA H100 80GB HBM3").name
        'h100-sxm'
        >>> DeviceSpec.for_device("NVIDIA H100 NVL") is None    # another part (94 GB, 3.9 TB/s): no built-in
        True
        """
        from ._devices import for_device

        return for_device(device_name)


def _from_dict(data: dict[str, Any]) -> DeviceSpec:
    return DeviceSpec.from_dict(data)


def spec_of(spec: str | os.PathLike[str] | DeviceSpec) -> DeviceSpec:
    """What ``g.estimate(spec)`` accepts, as a ``DeviceSpec``: a built-in name (``"h100"``), a path to a spec
    JSON, or a ``DeviceSpec`` (returned as it is).

    >>> spec_of("a100").name
    'a100-80gb'
    >>> l4 = spec_of("l4")
    >>> spec_of(l4) is l4
    True
    """
    if isinstance(spec, DeviceSpec):
        return spec
    if isinstance(spec, os.PathLike):
        return DeviceSpec.load(spec)
    if isinstance(spec, str):
        from ._builtin import is_named

        if not spec.strip():
            raise SpecError("a device spec is a built-in name ('h100') or a path to a spec JSON, not an empty string")
        if is_named(spec):
            return DeviceSpec.named(spec)
        if spec.lower().endswith(".json") or os.sep in spec or Path(spec).exists():
            return DeviceSpec.load(spec)
        return DeviceSpec.named(spec)
    raise SpecError(f"a device spec is a built-in name ('h100'), a path to a spec JSON or a DeviceSpec, "
                    f"not {type(spec).__name__}")


_DTYPE_ALIASES = {"fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
                  "tf32": "tfloat32", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
                  "fp8": "float8_e4m3fn", "float8": "float8_e4m3fn"}


def _did_you_mean(key: str, choices: tuple[str, ...], aliases: Mapping[str, str] | None = None) -> str:

    if aliases and key.lower() in aliases:
        return f" (did you mean {aliases[key.lower()]!r}?)"
    close = difflib.get_close_matches(key, choices, n=2)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _mapping(value: object, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or any(not isinstance(k, str) for k in value):
        raise SpecError(f"{name} takes a mapping with string keys, not {value!r}")
    return value


def _positive(value: object, name: str, takes: str, *, zero: bool = False) -> None:
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value >= 0 if zero else value > 0))
    if not ok:
        raise SpecError(f"{name} takes {takes}, not {value!r}")


def _fraction(curves: Mapping[str, Efficiency], op_class: str, size: float | None, shape: float | None) -> float:
    curve = curves.get(op_class) or curves.get("other")
    return 1.0 if curve is None or size is None else curve.at(size, shape)
