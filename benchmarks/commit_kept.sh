#!/bin/bash
# Commits the runs the grids keep (benchmarks/results/*-runs/: a finished run's metrics) within a
# minute of each run's end, so that a session that ends, or a machine that goes, loses none of
# them. Started beside the queue (QUEUE.md):
#
#   setsid nohup bash benchmarks/commit_kept.sh > logs/commit_kept.log 2>&1 &
#
# It commits those paths only (a work tree's other changes stay uncommitted).
cd "$(dirname "$0")/.."
while true; do
  sleep 60
  changed=$(git status --porcelain --untracked-files=all -- benchmarks/results |
    awk '{print $2}' | grep -- '-runs/')
  [ -z "$changed" ] && continue
  names=$(echo "$changed" | awk -F/ '{print $5}' | sort -u | grep -v '^$' | tr '\n' ' ')
  # shellcheck disable=SC2086 (one path a word)
  git add -- $changed && git commit -q -m "Kept run metrics: ${names:-runs}" -- $changed || true
done
