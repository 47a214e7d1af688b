__version__ = "0.49.2"
