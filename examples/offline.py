"""Offline preference learning: a fixed dataset (here the replay buffer of the first half of a
short SAC run on Pendulum-v1), pairs of its segments labelled by a scripted teacher, then a
reward model fitted to those labels and IQL on the dataset relabelled by it."""

import sys

from prefrl import OfflineLearner, RLLearner, collect_dataset, make_queries

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000  # (CI runs it shorter)
sac = RLLearner("Pendulum-v1", steps=steps, warmstart_steps=1_000, eval_interval=steps // 2,
                checkpoint_interval=steps // 2, keep_checkpoints=0).train()  # fmt: skip
collect_dataset(sac.run_dir, "medium-replay", medium_step=steps // 2, out="datasets/pendulum")
queries = steps // 100  # (200 pairs of the default run's dataset labelled)
make_queries("datasets/pendulum", "queries.json", num=queries, length=25, teacher="oracle")
result = OfflineLearner("datasets/pendulum", "queries.json", "mr", steps=steps,
                        steps_per_call=500).train()  # fmt: skip
