#!/bin/bash
# RFCL in the paper's wall-time config (--preset rfcl-adroit) on adroit:door, pen and relocate,
# side by side on one GPU (seed 0, 8 env worker processes each), for DURATION seconds; the run
# directories land in logs/gpu/runs and are tarred, checkpoints left out, into $OUT/runs.tar.gz.
# Summarise them with `python benchmarks/rfcl_gpu_rows.py logs/gpu/runs`.
#
# Demos: logs/gpu/demos-adroit-door-5 (`prefrl demos plan --env adroit:door --episodes 5
# --seed 1000 --out logs/gpu/demos-adroit-door-5`) and the pen and relocate demos the CPU grids
# made (benchmarks/rfcl.py: logs/rfcl-bench/demos-adroit-{pen,relocate}-5).
#
# On a GPU machine whose Python lacks prefrl's dependencies (the device tool's machines: Python
# 3.12 with JAX, flax and optax but no MuJoCo), put Python 3.12 wheels in .whl first:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform any -d .whl mujoco==3.17.0 gymnasium==1.4.0 \
#     farama-notifications glfw pyopengl tyro==1.0.17 docstring-parser shtab typeguard \
#     tensorboardX==2.6.5 sqlalchemy==2.1.9 greenlet gymnasium-robotics==1.4.2 pettingzoo \
#     minari==0.5.4
# (greenlet needs --platform manylinux_2_24_x86_64 too; the kitchen and fetch assets can be
# zipped out of gymnasium-robotics' wheel to halve it).
set -u
D=${DURATION:-480}; W=${WORKERS:-8}; PY=${PY:-python3}; OUT=${OUT:-logs/gpu}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
fi
# prefrl.presets checks its PEBBLE preset's env (dmc:walker-walk) against dm_control's task list
# at import; where dm_control is missing (no run here uses it), a one-task list stands in.
if ! $PY -c "import dm_control" 2>/dev/null; then
  mkdir -p /tmp/site/dm_control && : > /tmp/site/dm_control/__init__.py
  echo 'ALL_TASKS = (("walker", "walk"),)' > /tmp/site/dm_control/suite.py
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-$PWD/src}
fi
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false  # (three processes share the GPU)
unset MUJOCO_GL
$PY -c "import jax, gymnasium_robotics, prefrl.demos.rfcl; print(jax.devices())" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; nproc
rm -rf logs/gpu/runs
run() {
  timeout -s INT -k 40 "$D" $PY -m prefrl rfcl --preset rfcl-adroit --env "adroit:$1" \
    --demos "$2" --reverse-time-divisor 1 --env-workers "$W" --seed 0 --eval-interval 25000 \
    --checkpoint-interval 1000000000 --log-interval 5000 --no-progress \
    --runs-dir logs/gpu/runs --name "$1" > "$OUT/$1.log" 2>&1
  echo "$1 exited $?"
}
run door logs/gpu/demos-adroit-door-5 & p1=$!
run pen logs/rfcl-bench/demos-adroit-pen-5 & p2=$!
run relocate logs/rfcl-bench/demos-adroit-relocate-5 & p3=$!
(while sleep 60; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; uptime; done) & mon=$!
wait $p1 $p2 $p3; kill $mon
tar czf "$OUT/runs.tar.gz" --exclude=checkpoints logs/gpu/runs
