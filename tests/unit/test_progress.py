"""Live progress: what a worker writes as requests finish, what the launcher reads while it waits, and
what the console shows (live lines on a terminal only, nothing with --quiet). The `python` in the
launcher test is a stand-in script: it exercises the harness's polling, not an engine."""

import io
import json
import stat
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.console import Console, describe
from infercheck.run.job import Group, Job, Request
from infercheck.run.launcher import launch
from infercheck.run.progress import PROGRESS, ProgressWriter, WorkerProgress, expected_results, reporting_tqdm


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def groups() -> list[Group]:
    plain = [Request(id=f"r{i}", prompt="1+1=") for i in range(3)]
    session = Request(id="s", prompt="a", turns=["b", "c", "d"])
    return [Group("plain", {}, plain), Group("agent", {}, [session])]


def test_a_session_counts_one_request_per_turn():
    assert [expected_results(g.requests) for g in groups()] == [3, 3]


def test_the_writer_counts_finished_requests_and_writes_at_most_twice_a_second(tmp_path):
    clock = Clock()
    writer = ProgressWriter(tmp_path, groups(), clock)
    assert WorkerProgress.read(tmp_path) == WorkerProgress(groups=2, total=6, started=writer.state.started)
    writer.start_group(1, "plain")
    writer.finished()
    writer.finished()
    on_disk = WorkerProgress.read(tmp_path)
    assert (on_disk.group, on_disk.index, on_disk.done) == ("plain", 1, 0)  # throttled: same instant
    clock.now = 0.6
    writer.finished()
    assert WorkerProgress.read(tmp_path).done == 3
    writer.start_group(2, "agent")
    for _ in range(5):  # more ticks than requests (a backend counting completions) stop at the total
        writer.finished()
    assert WorkerProgress.read(tmp_path) == WorkerProgress("agent", 2, 2, 6, 6, writer.state.started)


def test_a_torn_or_foreign_progress_file_is_no_progress(tmp_path):
    assert WorkerProgress.read(tmp_path) is None
    (tmp_path / PROGRESS).write_text('{"group": "pla')
    assert WorkerProgress.read(tmp_path) is None
    (tmp_path / PROGRESS).write_text('["a list"]')
    assert WorkerProgress.read(tmp_path) is None


def test_the_engine_progress_bar_reports_each_update_and_draws_nowhere(capsys):
    ticks = []
    bar = reporting_tqdm(lambda: ticks.append(1))(total=4, desc="Processed prompts", dynamic_ncols=True)
    for n in (1, 2, 1):
        bar.update(n)
    bar.close()
    assert len(ticks) == 3 and bar.n == 4
    assert capsys.readouterr() == ("", "")


def test_the_launcher_tells_its_watcher_what_the_worker_wrote(tmp_path):
    states = [{"group": "g", "index": 1, "groups": 1, "done": d, "total": 3, "started": 1.0} for d in (1, 2)]
    body = "; ".join(f"echo '{json.dumps(s)}' > {PROGRESS}; sleep 1.2" for s in states)
    body += "; echo '{\"state\": \"done\"}' > status.json"
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/bash\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    seen: list[WorkerProgress] = []
    run = launch(Job("vllm", "/models/x", "float32", [Group("g", {}, [Request(id="r0", prompt="1")])]),
                 EngineEnv("patched", "overlay", str(script), "t" * 40), tmp_path / "out", timeout_s=60,
                 watch=seen.append)
    assert run.ok
    assert {s.done for s in seen} == {1, 2} and all(s.total == 3 for s in seen)


def test_piped_output_has_stage_lines_and_nothing_live():
    stream = io.StringIO()
    with Console(stream=stream) as console:
        assert console.live is None
        console("run base: ok in 1.0s")
    assert stream.getvalue() == "[infercheck] run base: ok in 1.0s\n"


def test_quiet_prints_nothing():
    stream = io.StringIO()
    with Console(quiet=True, stream=stream, live=True) as console:
        assert console.live is None
        console("run base: ok in 1.0s")
    assert stream.getvalue() == ""


def test_a_terminal_shows_each_running_worker_until_it_ends():
    stream = io.StringIO()
    with Console(stream=stream, live=True) as console:
        watch = console.live.watch("base")
        watch(WorkerProgress("prefix-cache", 3, 12, 40, 128, 0.0))
        task = console.live.bars.tasks[0]
        assert (task.description, task.completed, task.total) == ("run base · group 3/12 prefix-cache", 40, 128)
        console.live.finish("base")
        assert console.live.bars.tasks == []
        console("run base: ok in 66.6s")
    assert "[infercheck] run base: ok in 66.6s" in stream.getvalue()


def test_a_starting_worker_is_described_as_starting():
    assert describe("reference-base", WorkerProgress(groups=4, total=10)) == "run reference-base · starting"
