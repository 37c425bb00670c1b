"""Tessera's version, on the ground floor so that any floor may name it."""

__version__ = "0.1.0"
