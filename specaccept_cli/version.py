"""The version, in one place: the package, the command line, provenance records and the build read it."""

__version__ = "0.1.0"
