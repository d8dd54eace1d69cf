"""Per-group reuse of worker results: only the groups without a cache entry run, the cached rows
join the fresh ones, failures are never cached. The `python` is a stand-in worker script."""

import json
import os
import stat
import sys
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.run.cache import launch_cached
from infercheck.run.job import Group, Job, Request

# The base interpreter (the stand-in uses the standard library only): a worker's view covers the repository,
# where the venv's own interpreter lives.
FAKE_WORKER = f"""#!{os.path.realpath(sys.executable)}
import json, sys
from pathlib import Path
if sys.argv[1] == "-c":  # the harness asking where the engine package is: a tree beside this script
    print(Path(__file__).parent / "engine" / "vllm")
    sys.exit(0)
args = sys.argv[sys.argv.index("--job") + 1:]
job, out = json.loads(Path(args[0]).read_text()), Path(args[2])
PACKAGE = ["vllm/a.py", "vllm/b.py"]
with open(Path(__file__).parent / "ran.log", "a") as log:
    log.write(" ".join(g["name"] for g in job["groups"]) + "\\n")
for g in job["groups"]:
    for r in g["requests"]:
        with open(out / "results.jsonl", "a") as f:
            f.write(json.dumps({{"id": r["id"], "group": g["name"], "prompt_ids": [1], "output_ids": [2],
                                "text": "2", "finish_reason": "length"}}) + "\\n")
    error = "RuntimeError: boom" if g["name"] == "broken" else None
    with open(out / "groups.jsonl", "a") as f:
        f.write(json.dumps({{"name": g["name"], "engine_args": {{}}, "num_requests": 1, "prompt_tokens": 1,
                            "output_tokens": 1, "elapsed_s": 0.1, "startup_s": 0.1, "error": error}}) + "\\n")
if job.get("trace"):  # what the real worker's tracer writes over the whole package: lines per group and file
    (out / "trace.json").write_text(json.dumps({{g["name"]: {{f: [len(g["name"]) + i] for i, f in enumerate(PACKAGE)}}
                                               for g in job["groups"]}}))
    (out / "sources.json").write_text("{{}}")
(out / "status.json").write_text('{{"state": "done"}}')
"""


def fake_env(tmp_path: Path) -> EngineEnv:
    script = tmp_path / "fake-python"
    script.write_text(FAKE_WORKER)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    package = tmp_path / "engine" / "vllm"
    package.mkdir(parents=True, exist_ok=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "b.py").write_text("y = 2\n")
    return EngineEnv("base", "overlay", str(script), "t" * 40)


def job(*names: str) -> Job:
    return Job("vllm", "/models/x", "float32",
               [Group(n, {}, [Request(id=f"{n}-r0", prompt="1+1=")], isolated=True) for n in names])


def test_only_uncached_groups_run_and_cached_rows_join(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path / "cache"))
    env = fake_env(tmp_path)
    first, reused = launch_cached(job("a", "broken"), env, tmp_path / "one", 30)
    assert first.ok and reused == 0
    second, reused = launch_cached(job("a", "b", "broken"), env, tmp_path / "two", 30)
    assert second.ok and reused == 1  # "a" from the cache; the failed group is run again
    assert (tmp_path / "ran.log").read_text().splitlines() == ["a broken", "b broken"]
    assert sorted(r.id for r in second.results()) == ["a-r0", "b-r0", "broken-r0"]
    assert sorted(g.name for g in second.groups()) == ["a", "b", "broken"]
    # a cached group's row keeps the computing run's times, marked reused (docs/design.md, "Where the time goes")
    assert {g.name: g.reused for g in second.groups()} == {"a": True, "b": False, "broken": False}
    assert json.loads((tmp_path / "two" / "job.json").read_text())["groups"][1]["name"] == "b"
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "timing.json").write_text("{}")  # left by an earlier worker in this folder
    third, reused = launch_cached(job("a", "b"), env, tmp_path / "three", 30)
    assert third.ok and reused == 2 and len((tmp_path / "ran.log").read_text().splitlines()) == 2
    assert not (tmp_path / "three" / "timing.json").exists()  # no worker ran: no worker's clock
    assert sorted(r.id for r in third.results()) == ["a-r0", "b-r0"]
    _, reused = launch_cached(job("a"), env, tmp_path / "four", 30, reuse=False)
    assert reused == 0 and (tmp_path / "ran.log").read_text().splitlines()[-1] == "a"


def test_a_resumed_run_harvests_groups_the_killed_run_finished(tmp_path, monkeypatch):
    """A worker folder left by a killed harness: group "a" finished, "b" did not. The rerun into the
    same folder runs only "b"; a folder written by another engine env is not harvested."""
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path / "cache"))
    env = fake_env(tmp_path)
    out = tmp_path / "run"
    first, _ = launch_cached(job("a"), env, out, 30)
    assert first.ok
    (out / "job.digests.json").write_text(json.dumps(job("a", "b").digests()))  # as the interrupted launch left it
    __import__("shutil").rmtree(tmp_path / "cache")  # the killed run never stored "a"
    again, reused = launch_cached(job("a", "b"), env, out, 30)
    assert again.ok and reused == 1 and (tmp_path / "ran.log").read_text().splitlines() == ["a", "b"]
    assert sorted(r.id for r in again.results()) == ["a-r0", "b-r0"]

    other = tmp_path / "other"
    launch_cached(job("a"), env, other, 30)
    __import__("shutil").rmtree(tmp_path / "cache")
    stranger = EngineEnv("patched", "overlay", env.python, "u" * 40)  # another tree
    _, reused = launch_cached(job("a"), stranger, other, 30)
    assert reused == 0 and (tmp_path / "ran.log").read_text().splitlines()[-1] == "a"


def test_options_round_trip_with_patch_copies(tmp_path):
    from infercheck.options import ValidateOptions, load_options, save_options

    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/x.py\n+++ b/x.py\n")
    opts = ValidateOptions(patch=patch, base_patches=[patch], suites=["parity"], apps=["none"], case="c",
                           expected="RESOLVED", out=tmp_path / "old")
    save_options(opts, tmp_path / "run")
    patch.unlink()  # the resume needs nothing outside the run folder
    back = load_options(tmp_path / "run")
    assert back.patch.read_text().startswith("--- a/x.py") and back.base_patches[0].is_file()
    assert (back.suites, back.apps, back.case, back.expected, back.out) == (["parity"], ["none"], "c", "RESOLVED",
                                                                            tmp_path / "run")
    save_options(back, tmp_path / "run")  # resuming a resumed run keeps the same copies
    assert load_options(tmp_path / "run").patch == back.patch
    moved = tmp_path / "moved"  # a run folder read elsewhere (a recorded run) finds its own copies
    (tmp_path / "run").rename(moved)
    assert load_options(moved).patch.read_text().startswith("--- a/x.py")


def test_a_traced_job_reuses_a_group_whatever_files_it_keeps(tmp_path, monkeypatch):
    """Every traced engine job traces the whole package, so a group computed for one patch's files
    serves another's; the run folder keeps the lines and text of its own patch's files only."""
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path / "cache"))
    env = fake_env(tmp_path)
    traced = lambda *names, files=("vllm/a.py",): Job("vllm", "/models/x", "float32", job(*names).groups,  # noqa: E731
                                                    trace=["vllm"], sources=list(files))
    launch_cached(traced("aa"), env, tmp_path / "one", 30)
    second, reused = launch_cached(traced("aa", "bbb"), env, tmp_path / "two", 30)
    assert reused == 1 and (tmp_path / "ran.log").read_text().splitlines() == ["aa", "bbb"]
    trace = json.loads((tmp_path / "two" / "trace.json").read_text())
    assert trace == {"bbb": {"vllm/a.py": [3]}, "aa": {"vllm/a.py": [2]}}  # the cached group's lines joined
    assert json.loads((tmp_path / "two" / "sources.json").read_text()) == {"vllm/a.py": "x = 1\n"}
    # Another patch's files: the same entries, narrowed to its files; a file the engine lacks reads None.
    _, reused = launch_cached(traced("aa", "bbb", files=("vllm/b.py", "vllm/new.py")), env, tmp_path / "three", 30)
    assert reused == 2 and len((tmp_path / "ran.log").read_text().splitlines()) == 2
    assert json.loads((tmp_path / "three" / "trace.json").read_text()) == {"aa": {"vllm/b.py": [3]},
                                                                         "bbb": {"vllm/b.py": [4]}}
    assert json.loads((tmp_path / "three" / "sources.json").read_text()) == {"vllm/b.py": "y = 2\n",
                                                                           "vllm/new.py": None}
    # An untraced job's entry holds no lines: a traced job does not take it.
    launch_cached(job("cc"), env, tmp_path / "four", 30)
    _, reused = launch_cached(traced("cc"), env, tmp_path / "five", 30)
    assert reused == 0 and json.loads((tmp_path / "five" / "trace.json").read_text()) == {"cc": {"vllm/a.py": [2]}}
    # The harness narrowed that trace: a resume of the folder never stores it as a group's lines.
    assert (tmp_path / "five" / "trace.narrowed").is_file()
