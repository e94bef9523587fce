"""proposers."""
