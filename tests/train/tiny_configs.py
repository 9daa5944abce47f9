"""Config overrides shared by the tests that run the trainer end to end (``--config.`` lines without
the prefix): two groups of two three-step episodes, and a demo model small enough for CPU."""

# Every end-to-end run: short episodes, no progress bar in the test log.
SHORT_EPISODES = [
    "env.groups_per_iteration=2",
    "env.group_size=2",
    "env.max_env_steps=3",
    "logging.progress_bar=false",
]
# The demo config's model, shrunk.
TINY_MODEL = [
    "model.architecture.hidden_size=32",
    "model.architecture.intermediate_size=64",
    "model.architecture.num_layers=1",
]
# Short iterations of the PPO loop: little sampling, small mini-batches, an eval and a save often.
SHORT_ITERATIONS = [
    "env.eval_tasks_per_split.eval_id=2",
    "sampling.max_new_tokens=8",
    "ppo.minibatch_rows=8",
    "ppo.microbatch_rows=4",
    "run.eval_every=2",
    "run.save_every=1",
]


def short_sft(episodes: int = 2, epochs: int = 1) -> list[str]:
    """The SFT warm start on ``episodes`` expert episodes for ``epochs`` epochs."""
    return [f"sft.episodes={episodes}", f"sft.epochs={epochs}", "sft.batch_rows=4"]
