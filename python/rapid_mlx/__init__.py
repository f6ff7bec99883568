"""rapid-mlx: a native (C++) local LLM inference server. This package only locates and execs the
binaries installed beside it; no Python runs in the serving path."""
import os

__all__ = ["binary"]

_BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def binary(name="rapid-mlx"):
    """Absolute path of a bundled executable (rapid-mlx or rapid-mlx-http)."""
    path = os.path.join(_BIN_DIR, name)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path}: the rapid-mlx binaries are missing from this install (reinstall the package)")
    return path


def exec_binary(args):
    """Replaces this process with `rapid-mlx ARGS...` (same pid, no Python left running)."""
    path = binary()
    os.execv(path, [path] + list(args))
