"""torchvision for the tests, or a stand-in that skips the test using it where torchvision does not import.

No torchvision on PyPI imports beside torch 2.13 (each torchvision release is built for one torch), so
on the older torch of CI's second row (``scripts/test.sh``) the tests of torchvision's models are
skipped, each with this reason, and every other test of their file still runs: ``from vision import
torchvision`` in place of ``import torchvision``.
"""

from __future__ import annotations

from typing import Any

import pytest

AVAILABLE = True
_WHY = ""
try:
    import torchvision
except Exception as error:  # noqa: BLE001 - ImportError, or torchvision's own check of the torch beside it
    _WHY = f"needs torchvision, which does not import beside this torch ({type(error).__name__}: {error})"

    class _Missing:
        """Skips the test (or, used at import, the module) that reaches for any of torchvision's names."""

        def __getattr__(self, name: str) -> Any:
            if name.startswith(("_", "pytest")):  # pytest looking at a module's names while it collects
                raise AttributeError(name)
            pytest.skip(_WHY, allow_module_level=True)

    torchvision = _Missing()  # type: ignore[assignment]
    AVAILABLE = False

needs_torchvision = pytest.mark.skipif(not AVAILABLE, reason=_WHY)
"""For a test that reaches torchvision another way (the CLI's ``dispatchtrace resnet18``)."""

__all__ = ["AVAILABLE", "needs_torchvision", "torchvision"]
