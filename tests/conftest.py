"""Fixtures shared by the test folders (one per layer); helper modules (``models``, ``golden_text``,
``viewer_page``) sit beside this file and are imported by name."""

import pytest
from models import coolcnn
from models import resnet50 as _resnet50
from viewer_page import browser, shots  # noqa: F401 - the browser tests' fixtures (viewer_page), found here by pytest

import dispatchtrace as dt


@pytest.fixture(scope="module")
def cool() -> dt.Graph:
    """CoolCNN's capture on one seeded 1x3x32x32 image (``models.coolcnn``), once per test module."""
    return coolcnn()


@pytest.fixture(scope="module")
def resnet50() -> dt.Graph:
    """ResNet-50's capture (weights=None, eval, no_grad) on one seeded 224x224 image (``models.resnet50``)."""
    return _resnet50()
