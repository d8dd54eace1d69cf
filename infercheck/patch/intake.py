"""Read a patch file and refuse unsafe or malformed ones with one clear line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.patch.classify import classify_path

DIFF_PATH = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)")
GIT_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)")
SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000")


@dataclass(frozen=True)
class PatchFile:
    path: Path
    text: str
    files: tuple[str, ...]  # paths the patch names, relative to the tree root

    @property
    def classes(self) -> dict[str, str]:
        return {f: classify_path(f) for f in self.files}


def read_patch(path: Path) -> PatchFile:
    """Load and check a patch: exists, readable, non-empty text diff, safe paths only."""
    label = str(path)
    if not path.exists():
        raise InfercheckError(f"patch not found: {label}")
    if not path.is_file():
        raise InfercheckError(f"patch is not a file: {label}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InfercheckError(f"patch unreadable: {label} ({exc.strerror})") from None
    if not raw.strip():
        raise InfercheckError(f"patch is empty: {label}")
    if b"\0" in raw:
        raise InfercheckError(f"patch is binary, not a text diff: {label}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InfercheckError(f"patch is not UTF-8 text: {label}") from None
    files = _named_files(text)
    if not files:
        raise InfercheckError(f"patch has no file diffs: {label}")
    for line in text.splitlines():
        if line.startswith("GIT binary patch") or (line.startswith("Binary files") and " differ" in line):
            raise InfercheckError(f"patch contains binary hunks, refused: {label}")
        if SYMLINK_MODE.match(line):
            raise InfercheckError(f"patch creates a symlink, refused: {label}")
    for f in files:
        if f.startswith("/") or ".." in Path(f).parts:
            raise InfercheckError(f"patch touches a path outside the engine tree, refused: {f} in {label}")
    return PatchFile(path.resolve(), text, tuple(files))


def _named_files(text: str) -> list[str]:
    names: list[str] = []
    for line in text.splitlines():
        header = GIT_HEADER.match(line)
        found = list(header.groups()) if header else []
        match = DIFF_PATH.match(line)
        if match and match.group(1) != "/dev/null":
            found.append(match.group(1))
        names.extend(n for n in found if n not in names)
    return names
