"""harness: a declarative testbed for AI agents on real infrastructure."""

__version__ = "0.1.0"
