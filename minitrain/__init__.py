"""minitrain: a hand-built, pure-NumPy deep-learning training library for teaching."""

__version__ = "0.1.0"
