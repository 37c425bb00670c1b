"""Tessera's command line (``tessera --help``)."""
