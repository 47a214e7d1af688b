"""The data: wheels-index.toml read into channels and targets, the builds known by sha256, index settings, the lock format."""
