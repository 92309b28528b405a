from __future__ import annotations

from penguin_harness._core import __version__

__all__ = ["__version__"]
