"""The client's version (see README.md, "Version policy")."""

__version__ = "0.1.0"
