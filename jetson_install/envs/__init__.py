"""What is on disk: the target's source, interpreters, environments and what each recorded."""
