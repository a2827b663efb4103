#!/bin/bash
# The run queue of benchmarks/QUEUE.md: two lanes side by side, one run at a time each (one
# core each), so that no core waits while a grid with an odd number of runs finishes its last
# one. The MetaWorld lane and the label-efficiency lane use different run folders (a folder takes
# one grid at a time). Every grid skips its finished runs (restored from benchmarks/results/*-runs
# on a new machine) and resumes stopped ones from their checkpoints, so the queue is started again
# from the top in each session:
#
#   mkdir -p logs && setsid nohup bash benchmarks/queue.sh > logs/queue.log 2>&1 &
#
# Run folders go under ~/prefrl-logs (outside the work tree); a finished grid only rewrites its
# rows (a minute). The commands are the queue's rows, so each row names its command.
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
RUNS=~/prefrl-logs
export MUJOCO_GL=egl

row() {  # row NUMBER COMMAND...: run one grid, logged with its start and end
  local number=$1
  shift
  echo "$(date -u '+%F %T') row $number: $*"
  nice -n 5 "$@" || echo "$(date -u '+%F %T') row $number ended with status $?"
  echo "$(date -u '+%F %T') row $number done"
}

mw() {  # mw NUMBER TASK: RFCL and SAC + demos from 1 scripted demo, 3 seeds
  row "$1" $PY benchmarks/rfcl.py --env "metaworld:$2" --demos 1 --preset rfcl-metaworld-cpu \
    --methods rfcl sac+demos --seeds 0 1 2 --jobs 1 --runs "$RUNS/rfcl-bench-mw"
}

labels() {  # labels NUMBER ARGS...: a label-efficiency grid, SAC-true runs shared
  row "$1" $PY benchmarks/label_efficiency.py "${@:2}" --jobs 1 --runs-dir "$RUNS/bench-labels"
}

metaworld_lane() {
  mw 11 stick-pull
  mw 12 stick-push
  mw 13 pick-place-wall
}

labels_lane() {
  labels 7 --envs dmc:walker-walk --labels 100 --methods pebble qpa --seeds 0 1 2
  labels 7c --envs dmc:walker-walk --labels 100 --methods qpa-ensemble --seeds 0 1
  labels 8 --envs dmc:walker-walk --labels 100 --teacher mistake \
    --methods pebble qpa qpa-no-crops --seeds 0
  labels 9 --envs dmc:cheetah-run --labels 100 --methods pebble qpa --seeds 0 1 2
  labels 10 --envs HalfCheetah-v5 --methods qpa --seeds 0 1 2
}

metaworld_lane > >(sed -u 's/^/[metaworld] /') 2>&1 &
labels_lane > >(sed -u 's/^/[labels] /') 2>&1 &
wait
# Too long for one session (5-8 h a preferences run): they go on only where machines are handed on.
row 6 $PY benchmarks/atari.py --env atari:Pong --seeds 0 1 2 --jobs 2 --runs "$RUNS/atari-bench"
row 6e $PY benchmarks/atari.py --env atari:Enduro --seeds 0 1 --jobs 2 --runs "$RUNS/atari-bench"
