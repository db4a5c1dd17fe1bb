"""Models by name and the small models the demo and the docs use.

``build(spec)`` builds any model by name, with example inputs: torchvision names, ``coolcnn``,
``hf:TYPE`` (``transformers``, from a default config), ``timm:NAME``, ``package.module:factory`` or
``path/to/file.py:Name``; nothing is downloaded. ``CoolCNN`` is the model of the first seed
question. Its frames are user code to the capture's source lines (``recording/_source.py``), as a
model of the user's own would be. ``transformers`` and ``timm`` are imported only when asked for.
"""

from ._catalogue import (
           BUILTIN,
           DEFAULT_SHAPE,
           FORMS,
           Built,
           Size,
           build,
           check_budget,
           inputs,
           memory_budget,
           names,
           parse_config,
           size,
)
from ._hf import TASKS, Task
from ._tensors import random_tensor
from .coolcnn import CoolCNN

__all__ = ["BUILTIN", "DEFAULT_SHAPE", "FORMS", "TASKS", "Built", "CoolCNN", "Size", "Task", "build", "check_budget", "inputs",
           "memory_budget", "names", "parse_config", "random_tensor", "size"]
