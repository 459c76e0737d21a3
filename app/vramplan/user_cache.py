"""The per-user cache folders (the hardware database's parsed files, the page's altair
bundle): one rule for whether a folder may hold them. Ground floor: imports nothing of the
package."""
from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_dir"]


def private_dir(path: Path) -> Path | None:
    """`path` created if needed, owned by this user, not writable by others and usable (write
    and search); else None (a cache then goes without: never an error)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        return path if os.access(path, os.W_OK | os.X_OK) else None
    except OSError:
        return None
