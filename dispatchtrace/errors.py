"""An exception as one line of text, for messages that must stay one line (the CLI, verify's report)."""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """The first non-empty line of ``str(error)``, stripped; ``""`` when the message is empty.

    >>> first_line(ValueError("\\n  bad shape  \\n(more detail)"))
    'bad shape'
    >>> first_line(KeyError())
    ''
    """
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


def one_line(error: BaseException) -> str:
    """``TypeName: first line`` (just ``TypeName`` when the message is empty).

    >>> one_line(RuntimeError("shapes differ\\nat op 3"))
    'RuntimeError: shapes differ'
    >>> one_line(StopIteration())
    'StopIteration'
    """
    text = first_line(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
