"""Renderers: text, DOT, files. Only this layer imports graphviz or writes files."""
