"""Small models the demo and the docs use: ``CoolCNN`` from the first seed question.

Their frames are user code to the capture's source lines (``recording/_source.py``), as a model of
the user's own would be.
"""

from .coolcnn import CoolCNN

__all__ = ["CoolCNN"]
