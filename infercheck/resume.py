"""Resumable runs: a validate writes its options (and copies of its patches) into the report folder
before any worker starts; `infercheck validate --resume DIR` reads them back and runs again into
DIR. Finished engine groups are not redone: the launcher harvests them from DIR's worker folders
into the cache (infercheck.run.cache), and an orphaned worker of the killed run is stopped first."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.pipeline import ValidateOptions

OPTIONS = "options.json"
PATH_FIELDS = ("patch", "engine_src", "symptom", "out")


def save_options(opts: ValidateOptions, inputs_dir: Path) -> None:
    """options.json with the patches copied beside it, so a resume needs nothing outside the folder."""
    copies = inputs_dir / "patches"
    copies.mkdir(parents=True, exist_ok=True)
    data = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}
    data["patch"] = str(copy_into(Path(opts.patch), copies, "patch"))
    data["base_patches"] = [str(copy_into(Path(p), copies, f"base{i}")) for i, p in enumerate(opts.base_patches)]
    tmp = inputs_dir / (OPTIONS + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(inputs_dir / OPTIONS)


def copy_into(path: Path, folder: Path, stem: str) -> Path:
    if path.resolve().parent == folder.resolve():  # a resumed run: already the copy
        return path
    target = folder / f"{stem}-{path.name}"
    shutil.copyfile(path, target)
    return target


def load_options(run_dir: Path) -> ValidateOptions:
    path = Path(run_dir) / "inputs" / OPTIONS
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InfercheckError(f"cannot resume {run_dir}: no inputs/{OPTIONS} (not a validate run folder, or "
                              f"one killed before its workers started: start it again)") from None
    except (OSError, ValueError) as exc:
        raise InfercheckError(f"cannot resume {run_dir}: unreadable {path}: {exc}") from None
    known = {f.name for f in fields(ValidateOptions)}
    kwargs = {k: v for k, v in data.items() if k in known}
    for key in PATH_FIELDS:
        if kwargs.get(key) is not None:
            kwargs[key] = Path(kwargs[key])
    kwargs["base_patches"] = [Path(p) for p in kwargs.get("base_patches") or []]
    try:
        opts = ValidateOptions(**kwargs)
    except TypeError as exc:
        raise InfercheckError(f"cannot resume {run_dir}: {path} lacks {exc}") from None
    opts.out = Path(run_dir)
    return opts
