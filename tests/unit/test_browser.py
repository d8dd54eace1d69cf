"""The HTML pages in a real headless browser (tests/browser.py: Debian's chromium through playwright):
the report of each recorded run (tests/data/runs/, regraded with no engine), the reports index over
them and a bench page built from their verdicts load with no console error and no network, every
internal link resolves, every plot renders; the index sorts and filters, each non-zero cell of the
bench's confusion matrix lists its runs. Full-page screenshots land in test-artifacts/."""

from __future__ import annotations

import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from infercheck.bench import BenchResult, BenchRow, write_bench
from infercheck.cases import load_case
from infercheck.paths import PATCHES_DIR
from infercheck.pipeline import regrade
from infercheck.report.files import write_index
from infercheck.report.html import cell_id
from tests.browser import chromium, chromium_or_skip, loaded

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CASE = load_case(PATCHES_DIR / "processed-logprobs-before-temperature")
RECORDED = sorted(p.name.removesuffix(".tar.xz") for p in RUNS.glob("*.tar.xz"))
MAX_PAGE_BYTES = 1_000_000  # a report stays one small self-contained file
# Index rows with no report page: an elapsed time of two digits (a text sort would put 10.0 before
# 9.5) and a start in another time zone (earliest, though its text sorts last).
EXTRA_ROWS = {"hung-run": {"headline": "ERROR:run", "elapsed_s": 10.0, "started": "2026-12-03T16:00:00+02:00"},
              "quick-run": {"headline": "RESOLVED", "elapsed_s": 9.5, "started": "2026-12-03T15:40:00+00:00"}}
FOLDER_COLUMN = 6
# Each page under test (relative to the reports folder) and its screenshot's name.
PAGES = {**{f"{name}/index.html": f"report-{name}.png" for name in RECORDED}, "index.html": "index.png",
         "bench/index.html": "bench.png"}


@dataclass
class Built:
    root: Path  # the reports folder
    bench: BenchResult  # what bench/index.html shows


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """reports/ holding the regraded recorded runs (each with its index.html), two verdict-only
    folders, the index over them and bench/index.html over the recorded verdicts."""
    root = tmp_path_factory.mktemp("browser") / "reports"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERCHECK_REPORTS", str(root))
        mp.setenv("INFERCHECK_CACHE", str(root.parent / "cache"))
        for name in RECORDED:
            with tarfile.open(RUNS / f"{name}.tar.xz") as tar:
                tar.extractall(root, filter="data")
        runs = {name: regrade(root / name)[0] for name in RECORDED}
    recorded = json.loads((root / RECORDED[0] / "verdict.json").read_text())
    for folder, fields in EXTRA_ROWS.items():
        (root / folder).mkdir()
        (root / folder / "verdict.json").write_text(json.dumps({**recorded, **fields, "patch": f"{folder}.patch"}))
    write_index(root)
    bench = bench_of(runs)
    write_bench(bench, root / "bench")
    return Built(root, bench)


@pytest.fixture(scope="module")
def reports(built) -> Path:
    return built.root


def bench_of(runs: dict) -> BenchResult:
    """A bench over the recorded verdicts, plus one row expecting RESOLVED of the WORKAROUND run so
    that the matrix has a cell off its diagonal."""
    why = {c.name: c.why for c in CASE.candidates}
    rows = [BenchRow(CASE.id, name, run.expected, run.verdict.headline, run.elapsed_s, f"../{name}", why[name])
            for name, run in runs.items()]
    rows.append(BenchRow(CASE.id, "early-path-off-misjudged", "RESOLVED", runs["early-path-off"].verdict.headline,
                         1.0, "../early-path-off", "an expectation set wrong on purpose"))
    return BenchResult(rows, 4.0, True, False, [CASE.id])


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def visible(page, table: str, column: int) -> list[str]:
    return page.eval_on_selector_all(f"#{table} tbody tr", f"rows => rows.filter(r => !r.hidden)"
                                                          f".map(r => r.cells[{column}].textContent.trim())")


def test_the_recorded_runs_are_there(reports):
    assert all((reports / name / "index.html").is_file() for name in RECORDED)
    assert (reports / "index.html").is_file() and (reports / "bench" / "index.html").is_file()


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_clean_links_resolve_and_plots_render(page, reports, browser):
    path = reports / page
    with loaded(browser, path) as view:
        assert view.errors == []
        assert view.broken_links() == []
        plots = view.plots()
        assert plots["empty"] == [], f"{plots['count']} plot(s), not rendered: {plots['empty']}"
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / PAGES[page]
        view.page.screenshot(path=str(shot), full_page=True)
    size = path.stat().st_size
    print(f"\n{page}: {size} bytes, {plots['count']} plot(s); screenshot {shot}")
    assert size < MAX_PAGE_BYTES and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_index_sorts_by_time_and_elapsed_as_numbers(reports, browser):
    newest_first = ["quick-run", "early-path-off", "root-fix-with-finite-logprobs",
                    "root-processed-after-temperature", "hung-run"]
    with loaded(browser, reports / "index.html") as view:
        assert visible(view.page, "runs", FOLDER_COLUMN) == newest_first
        header = view.page.locator("#runs thead th")
        header.filter(has_text="time").click()
        assert visible(view.page, "runs", FOLDER_COLUMN) == newest_first[::-1]
        header.filter(has_text="elapsed").click()
        by_elapsed = ["early-path-off", "root-fix-with-finite-logprobs", "root-processed-after-temperature",
                      "quick-run", "hung-run"]  # 0.86, 0.98, 1.03, 9.5, 10.0 s
        assert visible(view.page, "runs", FOLDER_COLUMN) == by_elapsed
        header.filter(has_text="elapsed").click()
        assert visible(view.page, "runs", FOLDER_COLUMN) == by_elapsed[::-1]
        assert header.filter(has_text="elapsed").get_attribute("aria-sort") == "descending"
        assert view.errors == []


def test_index_filters_by_text_and_verdict(reports, browser):
    with loaded(browser, reports / "index.html") as view:
        page, count = view.page, view.page.locator('[data-count="runs"]')
        assert count.text_content() == "5"
        page.fill('[data-filter="runs"]', "2026-12-03T15:34")  # a date: the two runs started that minute
        assert visible(page, "runs", FOLDER_COLUMN) == ["early-path-off", "root-fix-with-finite-logprobs"]
        assert count.text_content() == "2"
        page.fill('[data-filter="runs"]', "ROOT-")  # a patch, case-insensitively
        assert visible(page, "runs", FOLDER_COLUMN) == ["root-fix-with-finite-logprobs", "root-processed-after-temperature"]
        page.select_option('[data-verdict="runs"]', "RESOLVED")
        assert visible(page, "runs", FOLDER_COLUMN) == ["root-processed-after-temperature"]
        page.fill('[data-filter="runs"]', "")
        assert visible(page, "runs", FOLDER_COLUMN) == ["quick-run", "root-processed-after-temperature"]
        page.select_option('[data-verdict="runs"]', "ERROR:run")
        assert visible(page, "runs", FOLDER_COLUMN) == ["hung-run"] and count.text_content() == "1"
        assert view.errors == []


def test_every_bench_matrix_cell_links_to_its_runs(built, browser):
    rows = built.bench.rows
    pairs = {(r.expected, r.got) for r in rows}
    with loaded(browser, built.root / "bench" / "index.html") as view:
        page = view.page
        cells = page.eval_on_selector_all("table:first-of-type td a", "links => links.map(a => a.getAttribute('href'))")
        assert sorted(cells) == sorted(f"#{cell_id(*pair)}" for pair in pairs) and len(pairs) == 4
        for expected, got in pairs:
            page.click(f'a[href="#{cell_id(expected, got)}"]')
            assert page.evaluate("location.hash") == f"#{cell_id(expected, got)}"
            listed = page.eval_on_selector_all(f"#{cell_id(expected, got)} li a", "links => links.map(a => a.textContent)")
            assert sorted(listed) == sorted(f"{r.case}/{r.candidate}" for r in rows if (r.expected, r.got) == (expected, got))
        assert view.errors == []



@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="chromium"):
        chromium_or_skip()


def test_the_checks_catch_a_broken_page(tmp_path, browser):
    """What the page test asserts empty is found when it is there: a dead anchor and file, an
    empty plot (a folded one counts as rendered), a console error, a request for anything but a file."""
    (tmp_path / "other.html").write_text("<p id=here>")
    page = tmp_path / "broken.html"
    page.write_text('<a href="#gone">a</a> <a href="missing.html">b</a> <a href="other.html#here">c</a> <a href="#ok">d</a>'
                    '<p id=ok><svg width="40" height="20"></svg><svg width="0" height="0"></svg></p>'
                    '<details><summary>s</summary><svg width="40" height="20"></svg></details>'
                    '<script>console.error("boom")</script><img src="http://127.0.0.1:9/x.png" width="1" height="1">')
    with loaded(browser, page) as view:
        assert [b.split(":")[0] for b in view.broken_links()] == ["#gone", "missing.html"]
        plots = view.plots()
        assert plots["count"] == 4 and [p[:4] for p in plots["empty"]] == ["<svg", "<img"]
        assert any("boom" in e for e in view.errors) and any("127.0.0.1:9" in e for e in view.errors)
