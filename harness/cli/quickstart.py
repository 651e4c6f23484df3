"""CLI: quickstart commands."""


def register(app):
    """Add this noun's commands to the app."""
