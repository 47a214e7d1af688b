"""The board: a root directory read into a `Platform` (read the files, then decide)."""
