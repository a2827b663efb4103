#!/bin/bash
# The run queue of benchmarks/QUEUE.md, in order, two runs at a time. Every grid skips its
# finished runs (restored from benchmarks/results/*-runs on a new machine) and resumes stopped
# ones from their checkpoints, so the queue is started again from the top in each session:
#
#   mkdir -p logs && setsid nohup bash benchmarks/queue.sh > logs/queue.log 2>&1 &
#
# Run folders go under ~/prefrl-logs (outside the work tree); a finished grid only rewrites its
# rows (a minute). The commands are the queue's rows, unchanged, so each row names its command.
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
    --methods rfcl sac+demos --seeds 0 1 2 --jobs 2 --runs "$RUNS/rfcl-bench-mw"
}

walker() {  # walker NUMBER ARGS...: the walker from 100 labels, SAC-true runs shared
  row "$1" $PY benchmarks/label_efficiency.py --envs dmc:walker-walk --labels 100 "${@:2}" \
    --jobs 2 --runs-dir "$RUNS/bench-labels"
}

mw 11 stick-pull
walker 7b --methods qpa-fit-stop --seeds 0 1
walker 7 --methods pebble qpa --seeds 0 1 2
walker 7c --methods qpa-ensemble --seeds 0 1
walker 8 --teacher mistake --methods pebble qpa qpa-no-crops --seeds 0
mw 12 stick-push
row 9 $PY benchmarks/label_efficiency.py --envs dmc:cheetah-run --labels 100 \
  --methods pebble qpa --seeds 0 1 2 --jobs 2 --runs-dir "$RUNS/bench-labels"
mw 13 pick-place-wall
row 10 $PY benchmarks/label_efficiency.py --envs HalfCheetah-v5 --methods qpa --seeds 0 1 2 \
  --jobs 2 --runs-dir "$RUNS/bench-labels"
# Too long for one session (5-8 h a preferences run): they go on only where machines are handed on.
row 6 $PY benchmarks/atari.py --env atari:Pong --seeds 0 1 2 --jobs 2 --runs "$RUNS/atari-bench"
row 6e $PY benchmarks/atari.py --env atari:Enduro --seeds 0 1 --jobs 2 --runs "$RUNS/atari-bench"
