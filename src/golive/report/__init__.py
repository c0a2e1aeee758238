"""Rendering of a bundle's verdict for people: Markdown (and later HTML)."""
