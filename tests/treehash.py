"""Fingerprint of a directory tree: every path, file content hash and mode (for 'input untouched')."""

import hashlib
import os
from pathlib import Path


def tree_fingerprint(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
            else:
                out[rel] = "dir" + oct(p.stat().st_mode)
    return out
