"""One TextWorldExpress JVM per process, shared by every adapter in it.

``TextWorldExpressEnv`` starts a JVM (~80 MB, py4j) per env object; 128 envs would mean 128 JVMs. The
Java side keeps all game state in ``textworldexpress.runtime.PythonInterface`` instances, so we start
one JVM with the package's own launcher and give each adapter its own ``PythonInterface`` in it.
Games from separate interfaces are independent and deterministic (same seed and fold: the same game,
whether played alone or concurrently from many threads, checked in tests/envs). py4j gives each
calling thread its own socket, so concurrent calls run in parallel in the JVM.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

_lock = threading.Lock()
_launcher: Any = None  # the TextWorldExpressEnv whose JVM and py4j gateway this process shares


def new_game_interface() -> Any:
    """A fresh ``PythonInterface`` (one game at a time) in this process's shared JVM."""
    global _launcher
    with _lock:
        if _launcher is None:
            from textworld_express import TextWorldExpressEnv

            try:
                _launcher = TextWorldExpressEnv()
            except FileNotFoundError as error:  # py4j could not exec `java`
                raise RuntimeError(f"TextWorldExpress needs Java >= 11 on PATH: {error}") from error
            atexit.register(shutdown)
        return _launcher._gateway.jvm.textworldexpress.runtime.PythonInterface()


def gateway_jvm() -> Any:
    """The py4j view of the shared JVM (for engine classes beyond ``PythonInterface``)."""
    with _lock:
        if _launcher is None:
            raise RuntimeError("no TextWorldExpress JVM yet: create a game interface first")
        return _launcher._gateway.jvm


def release(java_object: Any) -> None:
    """Lets the JVM garbage-collect an interface the adapter no longer uses."""
    with _lock:
        if _launcher is not None:
            _launcher._gateway.detach(java_object)


def shutdown() -> None:
    global _launcher
    with _lock:
        launcher, _launcher = _launcher, None
    if launcher is not None:
        try:
            launcher.close()
        except Exception:  # the JVM may already be gone (it exits with its parent)
            pass
        launcher.close = lambda: None  # its __del__ would close again and print a BrokenPipeError
