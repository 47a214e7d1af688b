"""Values and rules every layer shares: errors and exit codes, on-disk names, steps, redaction, the data-file reader."""
