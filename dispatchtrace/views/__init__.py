"""Views: pure functions from a captured graph to smaller structures."""
