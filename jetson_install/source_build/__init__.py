"""Source builds: packages built on the board for its exact GPU where no vendor build exists."""
