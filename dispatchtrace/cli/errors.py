"""The one exception the command line turns into a single ``dispatchtrace: error: ...`` line."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


class CliError(Exception):
    """A problem with what the user asked for; the message says what to do instead.

    >>> str(CliError("unknown model 'resnet5'; did you mean resnet50?"))
    "unknown model 'resnet5'; did you mean resnet50?"
    """

    exit_code = 2


class ArgumentParser(argparse.ArgumentParser):
    """``argparse`` that reports a bad argument as one ``CliError`` line instead of usage text,
    with the ``--debug`` flag every command has (``cli.main`` reads it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise CliError(f"{message} (see {self.prog} --help)")
