"""Which built-in spec a device's reported name (``torch.cuda.get_device_name()``) is, if any."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import SpecError

if TYPE_CHECKING:
    from ._spec import DeviceSpec

#: (pattern on the upper-cased name, built-in): first match wins; the names real parts report are in the
#: tests. Parts whose numbers differ from every built-in (H100 NVL, H200 NVL, GH200, A100 PCIe 80GB: other
#: bandwidth; A100 PCIe: no NVSwitch) match none.
PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bA100[- ]SXM4?[- ]40GB\b", "a100-40gb"),
    (r"\bA100[- ]SXM4?[- ]80GB\b", "a100-80gb"),
    (r"\bH100\b.*\b(NVL|GH200)\b|\bGH200\b", ""),
    (r"\bH100\b.*\bPCIE\b", "h100-pcie"),
    (r"\bH100\b.*\b(HBM3|SXM5?)\b", "h100-sxm"),
    (r"\bH200\b.*\bNVL\b", ""),
    (r"\bH200\b", "h200"),
    (r"\bB200\b", "b200"),
    (r"\bMI300X\b", "mi300x"),
    (r"\bL4\b", "l4"),
)


def for_device(device_name: str | None) -> DeviceSpec | None:
    """The built-in spec whose part reports ``device_name`` (``None``: the current CUDA device's), else ``None``."""
    from ._builtin import BUILT_IN

    if device_name is None:
        import torch

        if not torch.cuda.is_available():
            raise SpecError("no CUDA device to read a name from: name the part (DeviceSpec.for_device('NVIDIA H100 "
                            "80GB HBM3')) or a built-in spec ('h100')")
        device_name = torch.cuda.get_device_name()
    upper = device_name.upper()
    for pattern, name in PATTERNS:
        if re.search(pattern, upper):
            return BUILT_IN[name] if name else None
    return None
