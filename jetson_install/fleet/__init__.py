"""What a fleet provisions with: locks, wheelhouses, evidence read back, runner labels, containers."""
