"""Testing kit for users of the framework."""

from manager.testing.eventually import eventually

__all__ = ["eventually"]
