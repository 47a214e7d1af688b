"""The only modules that start a process (runner) or talk HTTP (index), and the argument lists they run (uv, git)."""
