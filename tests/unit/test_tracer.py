"""The worker's tracer (coverage.py, one context per group) on a plain module: each group's lines
under its own name, written after every group and again, complete, when measurement stops."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from infercheck.run.job import SOURCES, TRACE
from infercheck.run.worker import Tracer

MODULE = '''def first(x):
    return x + 1


def second(x):
    y = x * 2
    return y
'''


def load(path: Path):
    spec = importlib.util.spec_from_file_location("traced_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_group_keeps_its_own_lines_and_the_last_write_has_all(tmp_path):
    source = tmp_path / "traced_module.py"
    source.write_text(MODULE)
    out = tmp_path / "out"
    out.mkdir()
    tracer = Tracer([str(source)])
    module = load(source)
    tracer.group("g0")
    module.first(1)
    tracer.checkpoint(out)
    after_g0 = json.loads((out / TRACE).read_text())
    assert after_g0 == {"g0": {str(source.resolve()): [2]}}
    assert json.loads((out / SOURCES).read_text()) == {str(source.resolve()): MODULE}
    tracer.group("g1")
    module.second(1)
    tracer.checkpoint(out)
    after_g1 = json.loads((out / TRACE).read_text())
    assert after_g1["g0"] == after_g0["g0"] and after_g1["g1"] == {str(source.resolve()): [6, 7]}
    module.first(2)  # after g1's checkpoint, still in g1's context: only the last write has it
    tracer.save(out)
    final = json.loads((out / TRACE).read_text())
    assert final["g1"][str(source.resolve())] == [2, 6, 7]
    assert final[""][str(source.resolve())] == [1, 5]  # the module's own lines, before any group


def test_no_entries_traces_nothing(tmp_path):
    tracer = Tracer([])
    tracer.group("g0")
    tracer.checkpoint(tmp_path)
    tracer.save(tmp_path)
    assert not (tmp_path / TRACE).exists()
