"""CPL fine-tuning: clips of a trained policy are rated 1-100 (here by a scripted rater, in
place of a person on the rating page), the ratings become preferences, and Contrastive
Preference Learning fine-tunes the policy on them directly, with no reward model."""

import sys

from prefrl import CPLFinetuner, RLLearner, collect_rating_run, rate_scripted

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000  # (CI runs it shorter)
sac = RLLearner("Pendulum-v1", steps=steps, warmstart_steps=1_000, eval_interval=5_000).train()
ratings = collect_rating_run(sac.run_dir, "ratings", segments=60, length=50, clip_size=0)
rate_scripted(ratings.run_dir, "return")  # (a person: `prefrl serve ratings`, the /rate page)
result = CPLFinetuner(sac.run_dir, ratings.run_dir, steps=steps // 20).train()  # (1,000 by default)
