"""Fixtures shared by several test modules."""

from viewer_page import browser, shots  # noqa: F401 - the browser tests' fixtures (viewer_page), found here by pytest
