"""The one exception the command line turns into a single ``dispatchtrace: error: ...`` line."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn

#: a value that starts like a negative number (``-1x3x2x2``, ``-1``), not like an option
_DASHED_VALUE = re.compile(r"-[0-9.]")


class CliError(Exception):
    """A problem with what the user asked for; the message says what to do instead.

    >>> str(CliError("unknown model 'resnet5'; did you mean resnet50?"))
    "unknown model 'resnet5'; did you mean resnet50?"
    """

    exit_code = 2


class ArgumentParser(argparse.ArgumentParser):
    """``argparse`` that reports a bad argument as one ``CliError`` line instead of usage text,
    with the ``--debug`` flag every command has (``cli.main`` reads it).

    An option that takes one value also takes one that starts with ``-`` and a digit, so
    ``--input -1x3`` reaches the shape parser (which says what is wrong) as ``--input=-1x3`` does,
    instead of argparse's "expected one argument". ``examples`` end the help text, one a line.
    """

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.examples = tuple(examples)
        self.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")

    def format_help(self) -> str:
        """argparse's help, then the ``examples`` one command a line, as typed (not re-wrapped)."""
        lines = "".join(f"  {e}\n" for e in self.examples)
        return super().format_help() + (f"\nexamples:\n{lines}" if lines else "")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(None if args is None else self._attach_dashed_values(list(args)), namespace)

    def _attach_dashed_values(self, args: list[str]) -> list[str]:
        takes_one = {s for a in self._actions if a.option_strings and a.nargs is None for s in a.option_strings}
        out: list[str] = []
        i = 0
        while i < len(args):
            if args[i] == "--":
                return out + args[i:]
            if args[i] in takes_one and i + 1 < len(args) and _DASHED_VALUE.match(args[i + 1]):
                out.append(f"{args[i]}={args[i + 1]}")
                i += 2
            else:
                out.append(args[i])
                i += 1
        return out

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise CliError(f"{message} (see {self.prog} --help)")
