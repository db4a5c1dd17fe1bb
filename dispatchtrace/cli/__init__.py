"""The ``dispatchtrace`` command: ``dispatchtrace MODEL ...``, ``dispatchtrace demo``, ``calibrate``, ``diff``, ``mismatch``, ``render``, ``verify``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from .._text import one_line
from .._version import __version__
from ._errors import CliError

#: subcommands by first argument; each is a module ``dispatchtrace.cli._<name>`` with ``run(argv) -> int``
SUBCOMMANDS = ("calibrate", "demo", "diff", "mismatch", "render", "verify")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status (``0`` when all went well).

    Errors are one line on stderr and a non-zero status; ``--debug`` shows the traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if "--version" in args and args[0] not in SUBCOMMANDS:  # answered before torch is imported
        print(f"dispatchtrace {__version__}")
        return 0
    try:
        return _command(args)(args[1:] if args and args[0] in SUBCOMMANDS else args)
    except CliError as e:
        if debug:
            raise
        print(f"dispatchtrace: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("dispatchtrace: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # anything else: still one line, unless --debug
        if debug:
            raise
        print(f"dispatchtrace: error: {one_line(e)} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def _command(args: list[str]) -> Callable[[list[str]], int]:
    name = args[0] if args and args[0] in SUBCOMMANDS else "trace"
    try:
        module = importlib.import_module(f"{__name__}._{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}._{name}":
            raise
        raise CliError(f"the '{name}' command is not available in this version of dispatchtrace") from None
    return module.run
