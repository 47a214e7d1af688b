"""Stub OBLITERATUS."""
