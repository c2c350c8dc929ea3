"""Callbacks: watch a run at the loop's events (callback.py: the API; builtin.py: the ones a config names by type;
custom.py: a `module:function` entry point; a run's callbacks from its config: minitrain/training/watchers.py).

    from minitrain.callbacks import Callback, Context

This package's top imports only the API (callback.py), which the loop itself imports; the built-in callbacks use the
loop, so import them from minitrain.callbacks.builtin.
"""

from minitrain.callbacks.callback import Actions, Callback, CallbackList, Context, Triggered

__all__ = ["Actions", "Callback", "CallbackList", "Context", "Triggered"]
