"""In-process random play of the WebShop adapter: speed and repeated states.

``python -m envs_bridge.webshop.bench [--groups G] [--k K] [--max-steps N]`` plays G goals x K random
rollouts and prints one JSON line: steps/s of ``WebShopAdapter`` in this process (the baseline the
pool benchmark compares against), the share of steps whose state key is visited by at least two
rollouts of the same group (what graph credit needs, docs/environments.md §8), the purchase rate
and mean score.

The random policy picks uniformly among the admissible actions; for 'search[<your query>]' it types
the goal's own search words with probability 1/2 and otherwise a random 2-5 of them (a shopper who
read the instruction, with noise).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
from collections import defaultdict

from envs_bridge.base import StepResult
from envs_bridge.webshop.adapter import WebShopAdapter

SEARCH_TEMPLATE = "search[<your query>]"


def random_action(result: StepResult, search_words: list[str], rng: random.Random) -> str:
    action = rng.choice(result.admissible_actions)
    if action != SEARCH_TEMPLATE:
        return action
    if rng.random() < 0.5 or len(search_words) <= 2:
        return f"search[{' '.join(search_words)}]"
    return f"search[{' '.join(rng.sample(search_words, rng.randint(2, min(5, len(search_words)))))}]"


@dataclasses.dataclass
class PlayStats:
    steps: int = 0
    episodes: int = 0
    purchases: int = 0
    wins: int = 0
    score_sum: float = 0.0
    shared_steps: int = 0  # steps from a state that another rollout of the group also visited
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "steps": self.steps,
            "episodes": self.episodes,
            "steps_per_s": round(self.steps / self.seconds, 1) if self.seconds else None,
            "shared_state_share": round(self.shared_steps / self.steps, 4) if self.steps else None,
            "purchase_rate": round(self.purchases / self.episodes, 4) if self.episodes else None,
            "win_rate": round(self.wins / self.episodes, 4) if self.episodes else None,
            "mean_score": round(self.score_sum / self.episodes, 4) if self.episodes else None,
        }


def play_groups(env: WebShopAdapter, split: str, task_ids: list[int], k: int, seed: int = 0) -> PlayStats:
    """K random rollouts of each task; a step counts as shared when its state key (the state the action
    was taken in) was visited by at least two of the K rollouts of that task."""
    rng = random.Random(seed)
    stats = PlayStats()
    started = time.perf_counter()
    for task_id in task_ids:
        visitors: dict[str, set[int]] = defaultdict(set)
        step_states: list[str] = []
        search_words = env.goal(split, task_id).search_query.split()
        for rollout in range(k):
            result = env.reset(split, task_id, seed)
            while not result.done:
                visitors[result.state_key].add(rollout)
                step_states.append(result.state_key)
                result = env.step(random_action(result, search_words, rng))
            stats.episodes += 1
            stats.purchases += "reward_info" in result.info
            stats.wins += result.won
            stats.score_sum += result.score
        stats.steps += len(step_states)
        stats.shared_steps += sum(len(visitors[state]) >= 2 for state in step_states)
    stats.seconds = time.perf_counter() - started
    return stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=15)
    parser.add_argument("--split", default="train")
    args = parser.parse_args(argv)
    env = WebShopAdapter(max_steps=args.max_steps)
    stats = play_groups(env, args.split, list(range(args.groups)), args.k)
    print(json.dumps({"bench": "webshop_inprocess", "groups": args.groups, "k": args.k,
                      "max_steps": args.max_steps, **stats.to_json()}))


if __name__ == "__main__":
    main()
