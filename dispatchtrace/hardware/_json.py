"""A DeviceSpec as JSON and back, every field checked: a wrong one is one line naming the field and what it takes."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from ._efficiency import Efficiency
from ._fresh import FreshOutput
from ._link import Link

if TYPE_CHECKING:
    from ._spec import DeviceSpec

FORMAT = "dispatchtrace-devicespec"
VERSION = 2
READS = (1, 2)
"""The versions this dispatchtrace reads: 1 (curves by size only; no ``kernel_efficiency``, ``fresh_output`` nor
``attention_dropout_fused``) and 2."""
_REQUIRED = ("name", "peak_flops", "memory_bandwidth", "launch_overhead")
_FIELDS = ("format", "version", "name", "title", "peak_flops", "memory_bandwidth", "launch_overhead",
           "compute_efficiency", "memory_efficiency", "kernel_efficiency", "fresh_output", "attention_dropout_fused", "memory", "intra_node", "inter_node", "ranks_per_node", "sources")
_LINK_FIELDS = ("name", "bandwidth", "latency", "source")


def to_dict(spec: DeviceSpec) -> dict[str, Any]:
    """The spec's fields as JSON-able values, with the format's name and version first."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": spec.name,
        "title": spec.title,
        "peak_flops": dict(spec.peak_flops),
        "memory_bandwidth": spec.memory_bandwidth,
        "launch_overhead": spec.launch_overhead,
        "compute_efficiency": {k: _curve_json(c) for k, c in spec.compute_efficiency.items()},
        "memory_efficiency": {k: _curve_json(c) for k, c in spec.memory_efficiency.items()},
        "kernel_efficiency": {k: _curve_json(c) for k, c in spec.kernel_efficiency.items()},
        "fresh_output": None if spec.fresh_output is None else [list(p) for p in spec.fresh_output.points],
        "attention_dropout_fused": spec.attention_dropout_fused,
        "memory": spec.memory,
        "intra_node": _link_dict(spec.intra_node),
        "inter_node": _link_dict(spec.inter_node),
        "ranks_per_node": spec.ranks_per_node,
        "sources": dict(spec.sources),
    }


def from_dict(data: object, where: str) -> DeviceSpec:
    """A ``DeviceSpec`` from ``to_dict``'s values; ``where`` (a path, or ``"device spec"``) starts each error."""
    from ._spec import DeviceSpec

    if not isinstance(data, dict):
        raise SpecError(f"{where}: a device spec is a JSON object, not {type(data).__name__}")
    unknown = [k for k in data if k not in _FIELDS]
    if unknown:
        raise SpecError(f"{where}: unknown field {unknown[0]!r}{_close(unknown[0], _FIELDS)}; a device spec takes "
                        f"{', '.join(_FIELDS[2:])}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise SpecError(f"{where}: the field {missing[0]!r} is missing (a device spec needs {', '.join(_REQUIRED)})")
    if data.get("format", FORMAT) != FORMAT:
        raise SpecError(f"{where}: format takes {FORMAT!r}, not {data['format']!r}")
    if data.get("version", VERSION) not in READS:
        raise SpecError(f"{where}: version {data['version']!r} is not one this dispatchtrace reads "
                        f"({', '.join(map(str, READS))}); upgrade dispatchtrace or save the spec again")
    try:
        fields = {k: v for k, v in data.items() if k not in ("format", "version")}
        for name in ("compute_efficiency", "memory_efficiency", "kernel_efficiency"):
            if name in fields:
                fields[name] = _curves(fields[name], name)
        if fields.get("fresh_output") is not None:
            fields["fresh_output"] = FreshOutput(points=fields["fresh_output"])
        for name in ("intra_node", "inter_node"):
            if fields.get(name) is not None:
                fields[name] = _link(fields[name], name)
        return DeviceSpec(**fields)
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None


def load(path: str | os.PathLike[str]) -> DeviceSpec:
    """Read a spec JSON file; a missing, damaged or wrong file is a one-line ``SpecError``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such device spec file (a built-in name, or a JSON file written by "
                        "DeviceSpec.save or dispatchtrace calibrate)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read the device spec ({type(e).__name__}: {e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"{p}: not a valid device spec JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                        "write one with DeviceSpec.save or dispatchtrace calibrate -o") from None
    return from_dict(data, str(p))


def _curve_json(curve: Efficiency) -> list[list[float]] | dict[str, Any]:
    """A curve by size alone as its ``[[size, fraction], ...]`` (as version 1 wrote it); one with a shape axis as
    ``{"points": [...], "by_shape": [[shape, [[size, fraction], ...]], ...]}``."""
    points = [list(p) for p in curve.points]
    if not curve.by_shape:
        return points
    return {"points": points, "by_shape": [[shape, [list(p) for p in row]] for shape, row in curve.by_shape]}


def _curves(value: object, name: str) -> dict[str, Efficiency]:
    if not isinstance(value, dict):
        raise SpecError(f"{name} takes an object of op class -> [[size, fraction], ...], not {value!r}")
    curves = {}
    for key, points in value.items():
        try:
            if isinstance(points, dict):
                unknown = [k for k in points if k not in ("points", "by_shape")]
                if unknown or "points" not in points:
                    raise SpecError(f"a curve with a shape axis takes points and by_shape, not {sorted(points)}")
                curves[key] = Efficiency(points=points["points"], by_shape=points.get("by_shape", ()))
            else:
                curves[key] = Efficiency(points=points)
        except SpecError as e:
            raise SpecError(f"{name}[{key!r}]: {e}") from None
    return curves


def _link(value: object, name: str) -> Link:
    if not isinstance(value, dict):
        raise SpecError(f"{name} takes an object with bandwidth, latency, name and source (or null), not {value!r}")
    unknown = [k for k in value if k not in _LINK_FIELDS]
    if unknown:
        raise SpecError(f"{name}: unknown field {unknown[0]!r}; a link takes {', '.join(_LINK_FIELDS)}")
    for text in ("name", "source"):
        if not isinstance(value.get(text, ""), str):
            raise SpecError(f"{name}.{text} takes a string, not {value[text]!r}")
    for number in ("bandwidth", "latency"):
        if number not in value:
            raise SpecError(f"{name}.{number} is missing")
        if isinstance(value[number], bool) or not isinstance(value[number], (int, float)):
            raise SpecError(f"{name}.{number} takes a number, not {value[number]!r}")
    try:
        return Link(**value)
    except ValueError as e:
        raise SpecError(f"{name}: {e}") from None


def _link_dict(link: Link | None) -> dict[str, Any] | None:
    if link is None:
        return None
    return {"name": link.name, "bandwidth": link.bandwidth, "latency": link.latency, "source": link.source}


def _close(key: str, choices: tuple[str, ...]) -> str:

    close = difflib.get_close_matches(key, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
