"""The names ``import dispatchtrace as dt`` offers, pinned (as httpx pins its ``__all__``): adding or removing one
is a decision this file records, never a side effect of an import."""

from __future__ import annotations

import types

import dispatchtrace as dt

EXPORTS = [
    "Call", "Depth", "DeviceSpec", "DiagramTooLargeError", "DotFailedError", "DotNotFoundError", "Estimate",
    "FormatError", "Graph", "KeepBudgetError", "LintError", "Metric", "ModelError", "ModelTooLargeError",
    "NoValuesError", "NotKeptError", "Op", "RankEstimates", "ReplayError", "SavedError", "SpecError", "TensorRef",
    "capture", "diff", "estimate_ranks", "load", "load_ranks", "rank_path", "register_metric", "unregister_metric",
    "verify", "write_diff", "write_ranks",
]

#: the layers and helpers a user may import from (``dt.models.build``, ``dt.render.RenderOptions``)
MODULES = {"errors", "graph", "hardware", "models", "recording", "render", "replay", "serialize", "views"}


def test_the_exported_names_are_pinned() -> None:
    assert dt.__all__ == EXPORTS
    for name in dt.__all__:
        assert getattr(dt, name) is not None, name


def test_every_public_name_of_the_package_is_exported_or_a_module() -> None:
    public = {n for n in dir(dt) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(dt, n), types.ModuleType)}
    assert public - modules == set(dt.__all__)
    assert MODULES <= modules <= MODULES | {"cli"}  # (the CLI is a module of its own once a test imports it)
    assert dt.__version__


def test_every_error_of_errors_is_exported() -> None:
    errors = {n for n, v in vars(dt.errors).items() if isinstance(v, type) and issubclass(v, Exception)
              and v.__module__ == dt.errors.__name__}
    assert errors <= set(dt.__all__)
