"""Standalone probe scripts run by the target interpreter; they never import jetson_install."""
