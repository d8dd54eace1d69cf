"""junit.xml: one testsuite "infercheck", one testcase per check (plus one for run-level flags)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from infercheck.names import APP_LIKE, CheckKind, Variant
from infercheck.records import CheckResult, Flag, ValidationRun
from infercheck.report.view import app_view, check_summary, fmt_seconds, static_view
from infercheck.verdict import check_flags

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    """XML 1.0 cannot carry most control characters (decoded model output may hold them)."""
    return _NOT_XML.sub("\ufffd", str(text))


def _tag(flags: list[Flag]) -> str | None:
    """failure when any flag drives a failing verdict; skipped when all only make it INCONCLUSIVE."""
    if not flags:
        return None
    return "skipped" if all(f.code == "INCONCLUSIVE" for f in flags) else "failure"


def _case(suite: ET.Element, classname: str, name: str, flags: list[Flag], lines: list[str]) -> str | None:
    case = ET.SubElement(suite, "testcase", classname=_xml(classname), name=_xml(name))
    if tag := _tag(flags):
        messages = [f"{f.code}: {f.message}" for f in flags]
        element = ET.SubElement(case, tag, message=_xml("; ".join(messages)))
        element.text = _xml("\n".join(lines + messages))
    return tag


def _detail_lines(check: CheckResult) -> list[str]:
    """Apps: pass/FAIL per variant with the failed comparators; static: the evidence lines."""
    if check.kind in APP_LIKE:
        view = app_view(check)
        lines = [f"{v}: {view.status[v].text}" for v in (Variant.BASE, Variant.PATCHED)]
        lines += [f"prefix-cache hit rate {view.hit_rate}; tokens/s {view.tokens_per_s}"]
        return lines + ([f"workaround signs: {view.workaround}"] if view.workaround else [])
    if check.kind == CheckKind.STATIC:
        return [f"{e['location']}: {e['sign']}: {e['text']}" for e in static_view(check).evidence]
    return []


def _check_case(suite: ET.Element, run: ValidationRun, check: CheckResult) -> str | None:
    """The run's stored verdict flags decide; a run stored without them gets them recomputed."""
    flags = [f for f in run.verdict.flags if f.check == check.name] or check_flags(check, run.verdict.has_symptom)
    lines = [check_summary(check)["line"], f"criterion: {check.criterion}", *_detail_lines(check)]
    return _case(suite, f"infercheck.{check.kind}", check.name, flags, lines)


def _run_level_case(suite: ET.Element, run: ValidationRun) -> str | None:
    """Flags no check raised (a build error, a static workaround sign) still reach CI."""
    flags = [f for f in run.verdict.flags if f.check is None]
    return _case(suite, "infercheck.run", "run-level flags", flags, list(run.errors)) if flags else None


def render_junit(run: ValidationRun) -> str:
    suite = ET.Element("testsuite", name="infercheck", time=f"{run.elapsed_s:.3f}", timestamp=_xml(run.started))
    props = ET.SubElement(suite, "properties")
    for name, value in (("headline", run.verdict.headline), ("exit_code", run.verdict.exit_code),
                        ("patch", run.patch.name), ("model", run.model), ("engine", run.engine),
                        ("elapsed", fmt_seconds(run.elapsed_s)), ("command", run.command)):
        ET.SubElement(props, "property", name=name, value=_xml(value))
    outcomes = [_check_case(suite, run, c) for c in run.checks] + [_run_level_case(suite, run)]
    cases = len(suite.findall("testcase"))
    suite.set("tests", str(cases))
    suite.set("failures", str(outcomes.count("failure")))
    suite.set("skipped", str(outcomes.count("skipped")))
    suite.set("errors", "0")
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
