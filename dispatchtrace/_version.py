"""The version of this dispatchtrace, as saved files record it (``dt.__version__``)."""

__version__ = "0.1.0"
