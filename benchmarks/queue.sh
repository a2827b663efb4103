#!/bin/bash
# The run queue of benchmarks/QUEUE.md: two lanes side by side, one run at a time each (one
# core each), so that no core waits while a grid with an odd number of runs finishes its last
# one. The two lanes never use the same run folder at once (a folder takes one grid at a time).
# Every grid skips its finished runs (restored from benchmarks/results/*-runs on a new machine)
# and resumes stopped ones from their checkpoints, so the queue is started again from the top in
# each session:
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
  nice -n 5 "$@"
  local status=$?  # (read before anything else sets it)
  [ $status -eq 0 ] || echo "$(date -u '+%F %T') row $number ended with status $status"
  echo "$(date -u '+%F %T') row $number done"
}

mw() {  # mw NUMBER TASK: RFCL and SAC + demos from 1 scripted demo, 3 seeds
  row "$1" $PY benchmarks/rfcl.py --env "metaworld:$2" --demos 1 --preset rfcl-metaworld-cpu \
    --methods rfcl sac+demos --seeds 0 1 2 --jobs 1 --runs "$RUNS/rfcl-bench-mw"
}

labels() {  # labels NUMBER DIR ARGS...: a label-efficiency grid, SAC-true runs shared in DIR
  row "$1" $PY benchmarks/label_efficiency.py "${@:3}" --jobs 1 --runs-dir "$RUNS/$2"
}

backflip() {  # backflip NUMBER DIR ARGS...: the Hopper backflip (examples/backflip.py's rule)
  row "$1" $PY benchmarks/backflip.py "${@:3}" --runs-dir "$RUNS/$2"
}

old_backflip() {  # old_backflip NUMBER COMMIT DIR SEED METHOD: one run of an earlier backflip rule
  # with the code of the commit that held it (a git worktree under logs/, its own src first on the
  # path); its row, by seed, goes to benchmarks/results/backflip-DIR.json (commit it)
  local tree=$PWD/logs/worktree-$2
  [ -d "$tree" ] || { git worktree prune && git worktree add --detach "$tree" "$2" > /dev/null; } || return
  row "$1" env PYTHONPATH="$tree/src" $PY "$tree/benchmarks/backflip.py" --seeds "$4" --only "$5" \
    --runs-dir "$RUNS/$3"
  env PYTHONPATH="$tree/src" $PY "$tree/benchmarks/backflip.py" --seeds "$4" --report-only \
    --runs-dir "$RUNS/$3" || return
  $PY - "$tree/benchmarks/results/backflip.json" "benchmarks/results/backflip-$3.json" "$4" "$2" <<'PY'
import json, pathlib, sys
tree, out, seed, commit = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
new = [{**r, "code": commit} for r in json.loads(open(tree).read())["results"]
       if r.get("seeds") == [seed]]
old = json.loads(out.read_text())["results"] if out.exists() else []
key = lambda r: (r.get("rule"), r["method"], tuple(r["seeds"]))
merged = {key(r): r for r in old} | {key(r): r for r in new}
out.write_text(json.dumps({"results": list(merged.values())}, indent=2) + "\n")
PY
}

atari() {  # atari NUMBER DIR ARGS...: a game from preferences and on its score, runs in DIR
  row "$1" $PY benchmarks/atari.py "${@:3}" --jobs 1 --runs "$RUNS/$2"
}

# Two lanes, one an issue: issue 59's runs (about 2 hours each) end inside a session, so its
# lane makes progress on any machine; issue 58's lane holds MetaWorld's rows (which also end inside
# a session), then the Atari runs longer than a session, which go on only where a machine is handed
# on (QUEUE.md). Until 2026-12-01 (session 65) the lanes split by run length: Pong's preference
# runs held a core in every session and were lost with two machines (at 1.2M and 1.6M of 5M
# steps), while issue 59's rows waited behind row 13.
lane_58() {
  mw 11 stick-pull
  mw 12 stick-push
  # (Row 1f, the twelfth backflip try, is done: its row stands in results/backflip.json, and the
  # backflip grid keeps no metrics to restore, so on a new machine it would run again.)
  # Row 13's SAC + demos seed 0 (under way), then the backflip's seeds, whose outcome decides the
  # next backflip try, then SAC + demos seeds 1-2 (a baseline nothing else waits on).
  row 13 $PY benchmarks/rfcl.py --env metaworld:pick-place-wall --demos 1 \
    --preset rfcl-metaworld-cpu --methods sac+demos --seeds 0 --jobs 1 --runs "$RUNS/rfcl-bench-mw"
  # (Row 1h, the thirteenth try, is done: the twelfth rule with practice starts mid-flip, RULE
  # 'practice'; no flip landed. Its row stands in results/backflip.json; the grid keeps no metrics,
  # so on a new machine it would run again.)
  # (Rows 1i and 1k, the fourteenth try, are done: SAC's temperature held at 0.05, stopped at 170k,
  # and at 0.02, no flip landed in evaluations. Row 1k's row stands in results/backflip.json; the
  # backflip grid keeps no metrics, so on a new machine it would run again.)
  # The fifteenth try, PPO in place of SAC (rows 1m-1r; QUEUE.md): PPO on the rule landed flips at
  # 0.95-1.05M (row 1m); its seeds 1-2 (row 1r) say whether that holds on other seeds; then the
  # preference runs and the report of them all (its video: the preference run's policy). The
  # backflip grid keeps no metrics, so on a new machine the done rows run again (25-40 minutes
  # each).
  backflip 1p bench-backflip-ppo --seeds 0 --only pref-ppo-norm --steps 3000000
  backflip 1r bench-backflip-ppo --seeds 1 2 --only rule-reward-ppo --steps 3000000
  # The sixteenth try: the teacher prices time on the floor (row 1p's learned reward paid a flip
  # onto its back three times a landed flip), the preference run first (the target), then PPO on
  # that rule beside it.
  backflip 1v bench-backflip-ppo --seeds 0 --only pref-ppo-norm-floor --steps 3000000
  backflip 1u bench-backflip-ppo --seeds 0 --only rule-reward-ppo-floor --steps 3000000
  # PPO's learning rate falling to 0 over the run (row 1m lost its landed flips on a constant
  # rate): the preference run first (the target), then the rule's seeds.
  backflip 1s bench-backflip-ppo --seeds 0 --only pref-ppo-norm-anneal --steps 3000000
  backflip 1t bench-backflip-ppo --seeds 0 --only rule-reward-ppo-anneal --steps 3000000
  # Pong from preferences, seed 0 (about 12 hours beside the other lane), ahead of the backflip's
  # other tries and the baselines below: a headline result of the issue, twice lost with its
  # machine at 1.2M and 1.6M of 5M steps, while this machine has now been kept for five sessions.
  atari 6p atari-bench --env atari:Pong --algo ppo --methods prefs --seeds 0
  backflip 1q bench-backflip-ppo --seeds 0 --only pref-ppo-late --steps 3000000
  backflip 1m bench-backflip-ppo --seeds 0 --only rule-reward-ppo --steps 3000000
  backflip 1o bench-backflip-ppo --seeds 0 --only rule-reward-ppo-norm --steps 3000000
  backflip 1r bench-backflip-ppo --seeds 0 1 2 --report-only
  backflip 1t bench-backflip-ppo --seeds 1 2 --only rule-reward-ppo-anneal --steps 3000000
  # Row 1k's run (SAC, temperature held at 0.02) on to 1M steps: its touch-downs were still coming
  # nearer standing at 500k, and it landed its first flip in training there (backflip note).
  backflip 1l bench-backflip-practice --seeds 0 --only rule-reward-alpha0.02 --steps 1000000
  backflip 1l bench-backflip-practice --seeds 0 --report-only
  # The fifth rule ('one-turn', the only one SAC landed flips under, on seed 0): seeds 1-2, to
  # learn whether that landing was one seed's luck (seed 2 landed none by 190k: session 71).
  old_backflip 1g 34421ac bench-backflip-one-turn 1 rule-reward
  old_backflip 1g 34421ac bench-backflip-one-turn 2 rule-reward
  mw 13 pick-place-wall
  # A2C on the score reached -5.4 in 20M frames, PPO 19.7: PPO takes the preference rows.
  atari 6 atari-bench --env atari:Pong --methods score --seeds 0
  atari 6p atari-bench --env atari:Pong --algo ppo --methods score --seeds 0
  atari 6p atari-bench --env atari:Pong --algo ppo --seeds 0
  # Enduro's seed 0 (preferences and score) comes before Pong's preference seeds 1-2, so that the
  # issue's Enduro report has a seed on a machine kept that long. The target is Pong's preference
  # runs' (3 seeds); the score's seed 0 (19.7) is its baseline, and its seeds 1-2 (4.5 h each)
  # come last.
  atari 6e atari-bench-enduro --env atari:Enduro --algo ppo --seeds 0
  atari 6p atari-bench --env atari:Pong --algo ppo --methods prefs --seeds 0 1 2
  atari 6e atari-bench-enduro --env atari:Enduro --algo ppo --seeds 0 1
  atari 6p atari-bench --env atari:Pong --algo ppo --seeds 0 1 2
}

lane_59() {
  labels 7 bench-labels --envs dmc:walker-walk --labels 100 --methods pebble qpa --seeds 0 1 2
  # One seed of each try at the walker's 0.9 first (the reward from 100 labels is what falls
  # short: QUEUE.md), then the rows the issue asks to report, then the tries' other seeds.
  local walker=(--envs dmc:walker-walk --labels 100)
  # 7e (labels spread to 415k) made 0.49 with seed 0, 7g (QPA's code's rules) 0.52 and 7d
  # (B-Pref's SAC rates) 0.63 against QPA's 0.69 on that seed: their seeds 1-2 are not run.
  labels 7e bench-labels "${walker[@]}" --methods qpa-spread --seeds 0
  labels 7g bench-labels "${walker[@]}" --methods qpa-code --seeds 0
  labels 7d bench-labels "${walker[@]}" --methods qpa-bpref-sac --seeds 0
  # Row 9's PEBBLE seed 2 (under way), then row 10's seed 0 ahead of row 9's other runs: row 10
  # is a target (HalfCheetah at 0.9 of SAC-true from 1000 labels), row 9 a report, and whether
  # QPA's parts lift HalfCheetah decides what its other seeds run.
  labels 9 bench-labels-b --envs dmc:cheetah-run --labels 100 --methods pebble --seeds 0 1 2 --only pref
  labels 10 bench-labels-b --envs HalfCheetah-v5 --methods qpa --seeds 0
  # Row 10's seed 0 reached 1.08 of SAC-true (session 74): its seeds 1-2 settle the target, ahead
  # of row 9's report.
  labels 10 bench-labels-b --envs HalfCheetah-v5 --methods qpa --seeds 0 1 2
  labels 9 bench-labels-b --envs dmc:cheetah-run --labels 100 --methods pebble qpa --seeds 0 1 2
  labels 8 bench-labels "${walker[@]}" --teacher mistake --methods pebble qpa qpa-no-crops --seeds 0
  labels 7f bench-labels "${walker[@]}" --methods qpa-replay-budget --seeds 0 1 2
  labels 7c bench-labels "${walker[@]}" --methods qpa-ensemble --seeds 0 1
}

run_lane() {  # run_lane ISSUE: the lane's rows, one start of it at a time on this machine
  exec 9> "logs/queue-$1.lock"
  if ! flock -n 9; then  # (held by the lane's bash and the grid it runs)
    echo "the $1 lane is running already (logs/queue-$1.lock): stop it first to start it again"
    return
  fi
  "lane_$1"
}

# `bash benchmarks/queue.sh 59` (or 58) runs one lane: a lane whose rows changed is started again
# without stopping the other.
mkdir -p logs
for lane in ${1:-58 59}; do
  case $lane in
    58 | 59) run_lane "$lane" > >(sed -u "s/^/[$lane] /") 2>&1 & ;;
    *) echo "no lane $lane: 58 or 59 (an issue's number)" >&2; exit 2 ;;
  esac
done
wait
