"""What a validate was asked to do, and its save/load in the run folder (docs/design.md, "State").

A validate writes its options (and copies of its patches) into `<run>/inputs/` before any worker
starts; `validate --resume RUN_DIR` and `regrade RUN_DIR` read them back. Paths inside the run
folder or the repository are stored relative to it, so a run folder moved to another checkout
(the recorded runs under tests/data/) still reads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from infercheck.draw import IDENTITY
from infercheck.errors import InfercheckError
from infercheck.paths import REPO_ROOT

OPTIONS = "options.json"
PATH_FIELDS = ("patch", "engine_src", "symptom", "out")
IN_RUN, IN_REPO = "run:", "repo:"


@dataclass
class ValidateOptions:
    patch: Path
    base_patches: list[Path] = field(default_factory=list)
    engine_src: Path | None = None
    model: str = "tiny-llama-add"
    dtype: str = "float32"
    symptom: Path | None = None
    suites: list[str] | None = None
    apps: list[str] | None = None  # None: the neighbour map's choice for the touched files
    out: Path | None = None
    fail_on: list[str] | None = None
    timeout_s: float = 900.0  # per worker
    run_timeout_s: float | None = None  # the whole validate (every worker together)
    reuse: bool = True
    refuse_judge_edits: bool = False  # refuse (exit 2) a patch that edits engine tests or CI config
    case: str | None = None
    expected: str | None = None
    command: str = ""
    seed: int | None = None  # the prompt draw's seed (draw.py); None: a fresh one when the run starts
    engine_tests: bool = True  # run the engine's own tests of the touched modules (docs/design.md, "Engine tests")
    jobs: int | None = None  # workers side by side (run/slots.py); None: what the machine allows
    floor: bool = True  # measure the noise floor (checks/noise_floor.py); False: parity keeps the table's values
    ray: str | None = None  # run the workers as Ray tasks at this address ("local": a local instance; run/ray_pool.py)


def store_path(path: Path | None, run_dir: Path) -> str | None:
    if path is None:
        return None
    resolved = Path(path).resolve()
    for prefix, root in ((IN_RUN, run_dir.resolve()), (IN_REPO, REPO_ROOT)):
        if resolved.is_relative_to(root):
            return prefix + str(resolved.relative_to(root))
    return str(resolved)


def load_path(text: str | None, run_dir: Path) -> Path | None:
    if text is None:
        return None
    for prefix, root in ((IN_RUN, run_dir), (IN_REPO, REPO_ROOT)):
        if text.startswith(prefix):
            return root / text[len(prefix):]
    return Path(text)


def save_options(opts: ValidateOptions, run_dir: Path) -> None:
    """inputs/options.json with the patches copied beside it, so a resume needs nothing outside the folder."""
    inputs = run_dir / "inputs"
    copies = inputs / "patches"
    copies.mkdir(parents=True, exist_ok=True)
    saved = replace(opts, patch=copy_into(Path(opts.patch), copies, "patch"),
                    base_patches=[copy_into(Path(p), copies, f"base{i}") for i, p in enumerate(opts.base_patches)])
    data = asdict(saved)
    for key in PATH_FIELDS:
        data[key] = store_path(getattr(saved, key), run_dir)
    data["base_patches"] = [store_path(p, run_dir) for p in saved.base_patches]
    tmp = inputs / (OPTIONS + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(inputs / OPTIONS)


def copy_into(path: Path, folder: Path, stem: str) -> Path:
    if path.resolve().parent == folder.resolve():  # a resumed run: already the copy
        return path
    target = folder / f"{stem}-{path.name}"
    shutil.copyfile(path, target)
    return target


def load_options(run_dir: Path, purpose: str = "resume") -> ValidateOptions:
    run_dir = Path(run_dir)
    path = run_dir / "inputs" / OPTIONS
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InfercheckError(f"cannot {purpose} {run_dir}: no inputs/{OPTIONS} (not a validate run folder, or "
                              f"one killed before its workers started: start it again)") from None
    except (OSError, ValueError) as exc:
        raise InfercheckError(f"cannot {purpose} {run_dir}: unreadable {path}: {exc}") from None
    known = {f.name for f in fields(ValidateOptions)}
    kwargs = {k: v for k, v in data.items() if k in known}
    kwargs.setdefault("seed", IDENTITY)  # a run recorded before prompt draws: the bundled instances
    for key in PATH_FIELDS:
        kwargs[key] = load_path(kwargs.get(key), run_dir)
    kwargs["base_patches"] = [load_path(p, run_dir) for p in kwargs.get("base_patches") or []]
    try:
        opts = ValidateOptions(**kwargs)
    except TypeError as exc:
        raise InfercheckError(f"cannot {purpose} {run_dir}: {path} lacks {exc}") from None
    opts.out = run_dir
    return opts
