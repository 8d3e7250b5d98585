"""The skill archive the fuzz seeds bundles with (run.py) and pushes in valid cases (hooks.py)."""

from __future__ import annotations

import io
import tarfile


def skills_archive() -> bytes:
    """A gzip-compressed tar of one skill: what a bundle version holds."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = b"---\nname: fuzz\ndescription: A skill the fuzzer pushed.\n---\nDo nothing.\n"
        info = tarfile.TarInfo("fuzz/SKILL.md")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
