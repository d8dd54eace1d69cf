"""Reports of a validation run (report/files.py writes them): results.json, verdict.json,
junit.xml, summary.md and index.html in the run folder, plus an index over all runs. Everything
renders from a ValidationRun (no engine)."""
