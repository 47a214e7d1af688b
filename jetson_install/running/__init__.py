"""Carrying out a plan: the executor runs `plan.steps` into a new environment and switches it in."""
