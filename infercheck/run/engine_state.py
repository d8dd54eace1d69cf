"""vLLM's model-info cache, carried between workers (docs/engine-notes.md, "Running it").

Before it builds its first engine, vLLM inspects the model class in a subprocess that imports the
engine again (~10 s on this machine) unless `$VLLM_CACHE_ROOT/modelinfos/<class>.json` holds an
entry whose hash matches the model file's bytes. A worker's cache root lies in its private home
(run/sandbox.py), empty at every start, so every worker paid those 10 s. The harness keeps the
entries in its own cache and puts them into each worker's private home before it starts.

Only workers of engines the user trusts write entries back (base, unmodified, installed): the
candidate's worker reads them but what it writes is dropped, so a patch cannot plant an entry a
later base would read (vLLM checks the file's hash, not the entry's content). An entry is a few
hundred bytes of model capabilities; it changes no output.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from infercheck.paths import cache_dir
from infercheck.run.store import atomic_write

# Where vLLM writes them under a worker's private home (XDG_CACHE_HOME = home/.cache, run/sandbox.py).
IN_HOME = Path("home") / ".cache" / "vllm" / "modelinfos"
UNTRUSTED = frozenset({"patched"})  # the candidate's engine (build/variants.py)


def store() -> Path:
    return cache_dir() / "engine-state" / "modelinfos"


def seed(out_dir: Path) -> int:
    """Copy the kept entries into the worker's private home; how many."""
    kept = sorted(store().glob("*.json")) if store().is_dir() else []
    target = out_dir / IN_HOME
    try:
        if kept:
            target.mkdir(parents=True, exist_ok=True)
        for entry in kept:
            shutil.copyfile(entry, target / entry.name)
    except OSError:
        return 0  # only time is lost: vLLM inspects the model itself
    return len(kept)


def keep(env_name: str, out_dir: Path) -> int:
    """After a trusted worker: keep the entries it wrote (a reader never sees half a file); how
    many. A candidate's worker keeps nothing."""
    written = out_dir / IN_HOME
    if env_name in UNTRUSTED or not written.is_dir():
        return 0
    dest = store()
    count = 0
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for entry in sorted(written.glob("*.json")):
            atomic_write(dest / entry.name, entry.read_text(encoding="utf-8"))  # a temp name per writer
            count += 1
    except (OSError, UnicodeDecodeError):
        pass  # an entry not kept costs a later worker time, never a result
    return count
