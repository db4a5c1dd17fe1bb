"""``python -m dispatchtrace``: the same as the ``dispatchtrace`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
