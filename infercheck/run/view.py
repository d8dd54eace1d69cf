"""What a worker sees: its own inputs under neutral names, nothing of the judges (docs/design.md,
"What a worker sees").

The patched engine is untrusted code that may try to tell the harness from a user: read earlier
results or the reference's outputs, look for the harness in its paths or environment, recognise the
bundled inputs. Where mount namespaces work (run/sandbox.py), a worker runs in a view: an empty
tmpfs at a neutral root holding only its interpreter's environment, its engine overlay, the worker
code, its models, its lm-eval task inputs and its own run folder (the one writable place), each
bound there under a neutral name. The harness's repository, the result cache, the reports, the run's
other folders, the user's home and /tmp are then covered by empty read-only tmpfs mounts. The job
file, the command line, the working directory and the environment name only view paths.

Everything here is pure: a plan over paths, which the sandbox wrapper carries out.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from infercheck.run.job import Job

# The first of these that exists and holds nothing the worker needs becomes the view's root; what
# is there on the host is covered for the worker only.
VIEW_ROOTS = ("/srv", "/mnt", "/opt")
WORKER_CODE_FILES = ("__init__.py", "errors.py")  # besides run/: all a worker imports of the harness
ENTRY = "run/entry.py"  # the worker's entry point, run as <root>/bin/main.py
PYTEST_ENTRY = "run/pytest_entry.py"  # a pytest symptom's entry point, run as <root>/bin/test.py
SCRATCH = ("/tmp",)  # covered, but writable: some libraries write there directly
HARNESS_WORD = "infercheck"  # what the worker's environment must not name
PATH_LISTS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class Bind:
    source: str  # host path
    target: str  # the same thing's path in the view
    writable: bool = False


@dataclass(frozen=True)
class WorkerView:
    """The view's root, what is bound into it, and the host folders covered."""

    root: str
    binds: tuple[Bind, ...]
    masks: tuple[str, ...]  # covered read-only
    python: str  # the interpreter's path in the view
    pythonpath: tuple[str, ...]  # the engine overlay's folders and the worker code, in the view
    notes: tuple[str, ...] = field(default_factory=tuple)
    scratch: tuple[str, ...] = ()  # covered by an empty writable tmpfs (/tmp: code that writes there directly)
    cwd: str | None = None  # the working folder in the view (default: the run folder)

    def path(self, host: str | Path) -> str:
        """A host path as the worker sees it (the longest bound source that holds it); a path under
        no bind is returned unchanged (a hub model id, a relative engine file)."""
        text = str(host)
        best = None
        for bind in self.binds:
            if text == bind.source or text.startswith(bind.source.rstrip("/") + "/"):
                if best is None or len(bind.source) > len(best.source):
                    best = bind
        return text if best is None else best.target + text[len(best.source):]

    def hidden(self, host: str) -> bool:
        """Whether a host path lies under a covered folder and no bind carries it into the view."""
        return self.path(host) == host and any(_under(host, m) for m in (*self.masks, *self.scratch))

    def out_dir(self) -> str:
        return next(b.target for b in self.binds if b.writable)

    def sandbox_args(self) -> list[str]:
        """The wrapper's arguments (run/sandbox.py SANDBOX_SCRIPT): the root, then `bind ro|rw SRC DST`,
        `mask DIR` and `scratch DIR` operations, in order, and the run folder as working directory."""
        args = [self.root]
        for bind in self.binds:
            args += ["bind", "rw" if bind.writable else "ro", bind.source, bind.target]
        for mask in self.masks:
            args += ["mask", mask]
        for folder in self.scratch:
            args += ["scratch", folder]
        return args + ["cwd", self.cwd or self.out_dir()]

    def as_record(self) -> dict:
        return asdict(self)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def venv_prefix(python: str) -> Path | None:
    """The virtual environment an interpreter path belongs to (its pyvenv.cfg), else None."""
    prefix = Path(python).parent.parent
    return prefix if (prefix / "pyvenv.cfg").is_file() else None


def job_paths(job: Job) -> tuple[list[str], list[str]]:
    """(model folders, lm-eval task folders) of a job that exist on this machine."""
    models = [job.model, *(g.model for g in job.groups if g.model)]
    tasks = [t.include_path for g in job.groups for t in g.lm_eval]
    existing = lambda paths: list(dict.fromkeys(str(Path(p).resolve()) for p in paths if p and Path(p).exists()))
    return existing(models), existing(tasks)


def engine_binds(pythonpath: tuple[str, ...], root: str) -> list[Bind]:
    """Each overlay folder's packages and modules (not its build records) as <root>/engine<i>/."""
    binds = []
    for i, entry in enumerate(pythonpath):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for child in sorted(folder.iterdir()):
            if child.is_dir() or child.suffix in (".py", ".so", ".pth"):
                binds.append(Bind(str(child), f"{root}/engine{i}/{child.name}"))
    return binds


def interpreters(python: str) -> list[str]:
    """The real path of the worker's interpreter and, where it is a script, of the interpreter its
    `#!` line names: what must stay visible wherever the view covers."""
    real = os.path.realpath(python)
    try:
        with open(real, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return [real]
    if not first.startswith(b"#!") or not first[2:].split():
        return [real]
    return [real, os.path.realpath(first[2:].split()[0].decode(errors="replace"))]


def plan_binds(root: str, job: Job, python: str, pythonpath: tuple[str, ...], harness_code: Path,
               hf_home: str | None, out_dir: Path, extra: tuple[tuple[str, str], ...] = ()) -> list[Bind]:
    """Everything the worker needs, each at a neutral place under the root; `extra`: more host
    folders or files, each with its place relative to the root."""
    binds: list[Bind] = []
    prefix = venv_prefix(python)
    if prefix is not None:
        binds.append(Bind(str(prefix), f"{root}/env"))
    binds += engine_binds(pythonpath, root)
    binds += [Bind(str(harness_code / "run"), f"{root}/lib/{harness_code.name}/run")]
    binds += [Bind(str(harness_code / f), f"{root}/lib/{harness_code.name}/{f}") for f in WORKER_CODE_FILES]
    binds.append(Bind(str(harness_code / ENTRY), f"{root}/bin/main.py"))
    binds.append(Bind(str(harness_code / PYTEST_ENTRY), f"{root}/bin/test.py"))
    models, tasks = job_paths(job)
    names: set[str] = set()
    for model in models:
        name = Path(model).name
        while name in names:
            name += "-"
        names.add(name)
        binds.append(Bind(model, f"{root}/models/{name}"))
    binds += [Bind(task, f"{root}/tasks{i}") for i, task in enumerate(tasks)]
    if hf_home and Path(hf_home).is_dir():
        binds.append(Bind(hf_home, f"{root}/hf"))
    binds += [Bind(source, f"{root}/{place}") for source, place in extra]
    binds.append(Bind(str(out_dir), f"{root}/run", writable=True))
    return binds


def outermost(folders: list[str]) -> list[str]:
    """The folders none of the others holds, deduplicated, in order."""
    unique = list(dict.fromkeys(folders))
    return [f for f in unique if not any(o != f and _under(f, o) for o in unique)]


def plan_view(job: Job, python: str, pythonpath: tuple[str, ...], harness_code: Path, hf_home: str | None,
              out_dir: Path, covered: list[Path], extra: tuple[tuple[str, str], ...] = ()) -> WorkerView | str:
    """The view of one worker, or why none can be made here. `covered`: host folders to hide (the
    repository, cache, reports, the run folder, home, /tmp); one holding the interpreter itself is
    left visible and said in the notes. `extra`: plan_binds'."""
    keep = [k for real in interpreters(python) for k in (real, str(Path(real).parent.parent))]  # and their libraries
    notes, masks = [], []
    for folder in dict.fromkeys(str(Path(c).resolve()) for c in covered if Path(c).is_dir()):
        if folder == "/" or any(_under(k, folder) for k in keep):
            notes.append(f"{folder} stays visible: the worker's interpreter is there")
        else:
            masks.append(folder)
    masks = outermost(masks)
    probe_binds = plan_binds("/", job, python, pythonpath, harness_code, hf_home, out_dir.resolve(), extra)
    needed = [b.source for b in probe_binds] + keep
    for root in VIEW_ROOTS:
        if not Path(root).is_dir() or any(_under(n, root) for n in needed):
            continue
        if any(_under(root, m) or _under(m, root) for m in masks):
            continue
        binds = plan_binds(root, job, python, pythonpath, harness_code, hf_home, out_dir.resolve(), extra)
        prefix = venv_prefix(python)
        view_python = f"{root}/env/{Path(python).relative_to(prefix)}" if prefix is not None else python
        path = tuple(f"{root}/engine{i}" for i, p in enumerate(pythonpath) if Path(p).is_dir()) + (f"{root}/lib",)
        scratch = tuple(m for m in masks if m in SCRATCH)
        return WorkerView(root, tuple(binds), tuple(m for m in masks if m not in scratch), view_python, path,
                          tuple(notes), scratch)
    return f"no neutral root for the view (each of {', '.join(VIEW_ROOTS)} is missing or holds what the worker needs)"


def view_job(job: Job, view: WorkerView) -> Job:
    """The job with every host path the worker reads replaced by its view path."""
    groups = [replace(g, model=view.path(Path(g.model).resolve()) if g.model and Path(g.model).exists() else g.model,
                      lm_eval=[replace(t, include_path=view.path(Path(t.include_path).resolve())) for t in g.lm_eval])
              for g in job.groups]
    model = view.path(Path(job.model).resolve()) if job.model and Path(job.model).exists() else job.model
    trace = [view.path(t) if os.path.isabs(t) else t for t in job.trace]
    return replace(job, model=model, groups=groups, trace=trace)


def neutral_environ(environ: dict[str, str], view: WorkerView | None) -> dict[str, str]:
    """The worker's environment naming nothing of the harness: no variable of the harness's own
    (INFERCHECK_*). In a view also: host paths replaced by their view paths, paths the view hides
    dropped (an entry of a path list, else the whole variable), nothing left that names the harness,
    PYTHONPATH the view's and PWD the run folder. Without a view, paths stay as they are (the worker
    sees the host; the containment record says so)."""
    out: dict[str, str] = {}
    for key, value in environ.items():
        if key.upper().startswith(HARNESS_WORD.upper()):
            continue
        if view is None:
            out[key] = value
            continue
        mapped = _view_value(key, value, view)
        if mapped is not None and HARNESS_WORD not in mapped.lower():
            out[key] = mapped
    if view is not None:
        out["PYTHONPATH"] = os.pathsep.join(view.pythonpath)
        out["PWD"] = view.out_dir()
    return out


def _view_value(key: str, value: str, view: WorkerView) -> str | None:
    if key in PATH_LISTS:
        kept = [view.path(p) for p in value.split(os.pathsep) if p and not view.hidden(p)]
        return os.pathsep.join(p for p in kept if HARNESS_WORD not in p.lower())
    if not os.path.isabs(value):
        return value
    return None if view.hidden(value) else view.path(value)
