"""Reports of a validation run: results.json, verdict.json, junit.xml, summary.md and index.html in
the run folder, plus an index over all runs. Everything renders from a ValidationRun (no engine)."""

from infercheck.report.files import render_from_dir, write_index, write_report

__all__ = ["render_from_dir", "write_index", "write_report"]
