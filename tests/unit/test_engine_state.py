"""vLLM's model-info entries carried between workers: seeded into every worker's private home, kept
only from workers of trusted engines (run/engine_state.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercheck.run import engine_state


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path / "cache"))


def written(out_dir: Path, name: str, text: str) -> None:
    folder = out_dir / engine_state.IN_HOME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_a_trusted_workers_entries_are_kept_and_seeded_into_the_next_worker(tmp_path: Path):
    assert engine_state.seed(tmp_path / "first") == 0
    written(tmp_path / "first", "llama.json", '{"hash": "a"}')
    assert engine_state.keep("base", tmp_path / "first") == 1
    assert engine_state.seed(tmp_path / "second") == 1
    assert (tmp_path / "second" / engine_state.IN_HOME / "llama.json").read_text() == '{"hash": "a"}'
    assert not list(engine_state.store().glob(".*.tmp"))


def test_the_candidates_worker_reads_the_entries_but_never_writes_them_back(tmp_path: Path):
    written(tmp_path / "base", "llama.json", '{"hash": "a"}')
    engine_state.keep("base", tmp_path / "base")
    assert engine_state.seed(tmp_path / "patched") == 1
    written(tmp_path / "patched", "llama.json", '{"hash": "planted"}')
    written(tmp_path / "patched", "mistral.json", '{"hash": "b"}')
    assert engine_state.keep("patched", tmp_path / "patched") == 0
    assert sorted(p.name for p in engine_state.store().glob("*.json")) == ["llama.json"]
    assert (engine_state.store() / "llama.json").read_text() == '{"hash": "a"}'


def test_a_store_that_cannot_be_written_loses_time_not_the_run(tmp_path: Path):
    engine_state.store().parent.mkdir(parents=True)
    engine_state.store().write_text("")  # a file where the folder should be: every write fails
    written(tmp_path / "base", "llama.json", '{"hash": "a"}')
    assert engine_state.keep("base", tmp_path / "base") == 0
    assert engine_state.seed(tmp_path / "next") == 0
