"""Every error dispatchtrace raises on purpose, in one place; each is exported as ``dt.<Name>``.

Each message says what went wrong and what to do about it. ``except dt.FormatError`` catches a file
that cannot be read, ``except dt.DotNotFoundError`` a missing graphviz, and so on.
"""

from __future__ import annotations


class LintError(ValueError):
    """A graph breaks an invariant of ``docs/semantics.md``; the message names which, where, and what it means."""


class FormatError(ValueError):
    """A file that is not a dispatchtrace capture this version can read."""


class SavedError(Exception):
    """Base of the stand-ins for a loaded ``g.error`` whose type is not a built-in exception: a class
    of the same name (``type(g.error).__name__``), the message as ``str(g.error)``, ``.type`` the
    saved ``module.Qualname``. Its traceback is not saved."""

    type: str = ""


class ReplayError(RuntimeError):
    """The capture cannot be turned into a graph that runs; the message says which tensor or op."""


class DotNotFoundError(RuntimeError):
    """graphviz's ``dot`` program is not installed (or not on ``PATH``)."""


class DotFailedError(RuntimeError):
    """``dot`` ran but could not lay out or write the diagram."""


class DiagramTooLargeError(RuntimeError):
    """``dot`` would take too long to lay out this diagram; ``seconds`` is the estimate."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class ModelError(ValueError):
    """A model spec that names no model (the message suggests close names), a config key the model does
    not have, a task it has no class for, or a catalogue whose package is not installed (``hf:`` needs
    ``transformers``, ``timm:`` needs ``timm``; the message says what to install)."""


class ModelTooLargeError(ModelError):
    """The model's weights would not fit the memory budget on the CPU; ``nbytes`` and ``budget`` in bytes.
    Build it on ``device="meta"`` (shapes and ops, no weight memory) or with a smaller config."""

    def __init__(self, message: str, nbytes: int, budget: int) -> None:
        super().__init__(message)
        self.nbytes = nbytes
        self.budget = budget


class KeepBudgetError(MemoryError):
    """``capture(keep=...)`` would keep more bytes of tensor copies than ``keep_bytes`` allows; raised before the copy."""


class NotKeptError(LookupError):
    """``g.value(x)`` for a tensor, op or call whose value the capture did not keep (``keep=``)."""


class NoValuesError(ValueError):
    """A feature that reads values (``first_nonfinite``) on a capture without them (``values="none"``, meta tensors)."""


class SpecError(ValueError):
    """A device specification or interconnect that cannot be used: an unknown built-in name (the message
    suggests close names), a spec file that is not valid JSON or a field that takes something else (the
    message names the field and what it takes), a collective the spec's links cannot place. List the
    built-ins with ``dt.DeviceSpec.names()``; measure this machine with ``dispatchtrace calibrate -o spec.json``."""
