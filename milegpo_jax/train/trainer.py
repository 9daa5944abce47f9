"""One training run: policy set-up (checkpoint, or a small random model + tokenizer + SFT warm start),
then iterations of rollout -> credit -> PPO update -> metrics, with validation, orbax checkpoints,
automatic resume and a clean stop on SIGTERM.

Reproducibility: everything random in an iteration derives from (run.seed, iteration): the task
groups, the sampler keys and the mini-batch order. With the optimizer state and parameters restored
from a checkpoint, a resumed run therefore repeats exactly what an uninterrupted run would do.

Several devices or hosts: the parameters and optimizer state live on the global mesh (``mesh``
section, ``train`` rules). Each host runs its own env servers and plays its share of the iteration's
task groups with a host-local copy of the policy (``multihost.host_local_copy``); the hosts then
exchange their rollouts, so every host computes credit over the global batch and feeds the same rows
to the sharded update. Process 0 alone writes logs, plots and the warm-start checkpoint; orbax writes
the checkpoints from every host to the shared work directory.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from envs_bridge.specs import env_spec
from milegpo_jax import multihost
from milegpo_jax.config import ConfigError, TrainConfig, config_hash, config_identity, warm_start_inputs
from milegpo_jax.credit.api import compute_credit
from milegpo_jax.models import load_pretrained
from milegpo_jax.models.attention import check_attention_impl
from milegpo_jax.models.tokenizer import load_tokenizer
from milegpo_jax.parallel import logical_sharding, make_mesh
from milegpo_jax.rollout.collector import (
    RolloutBatch,
    collect,
    merge_host_batches,
    merge_passes,
)
from milegpo_jax.rollout.branching import TreeShape
from milegpo_jax.rollout.policy import SamplerPolicy
from milegpo_jax.train.checkpoint import Checkpointer, ConfigMismatchError, abstract_like
from milegpo_jax.train.evaluation import OUTCOMES_PREFIX, outcome_key, outcome_string
from milegpo_jax.train.logging import MetricsLogger, ProgressBar
from milegpo_jax.train.ppo import (
    UpdateStats,
    ppo_epoch,
    ppo_rows,
    sequence_capacity,
    with_reference_logprobs,
)
from milegpo_jax.train.preemption import PreemptionGuard
from milegpo_jax.train.step import build_train_step, jit_train_step, train_step_shardings, update_sharing
from milegpo_jax.train.trunk import trunk_states
from milegpo_jax.train.warm_start import WarmStartPlan, warm_start_status, write_warm_start

WARM_START_DIR = "warm_start"  # the Hugging Face checkpoint RL starts from (and the KL reference)
PROGRESS_KEYS = ("rollout/success_rate", "actor/kl", "actor/policy_loss", "eval/eval_id/success_rate")


class WorkdirError(OSError):
    """The work directory cannot be created or written (one line for the command line)."""


def writable_workdir(workdir: Path) -> Path:
    """``workdir`` created if needed and checked for writing (a probe file), else ``WorkdirError``."""
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe = workdir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise WorkdirError(f"work directory {workdir} is not writable: {error.strerror or error}") from None
    return workdir


def _seed(*parts: int) -> int:
    value = 0
    for part in parts:
        value = (value * 1_000_003 + int(part)) % 2**31
    return value


def warm_start_plan(config: TrainConfig) -> WarmStartPlan:
    """What the warm start of a run of ``config`` is built from (the trainer's, ``experiments/sft.py``'s)."""
    model, sft, env = config.model, config.sft, config.env
    return WarmStartPlan(
        inputs=warm_start_inputs(config), runtime=config.runtime_options(), hf_checkpoint=model.hf_checkpoint,
        preset=model.preset, architecture=model.architecture, init_seed=model.init_seed,
        tokenizer_dir=model.tokenizer_dir, seed=config.run.seed, sft_episodes=sft.episodes, sft_epochs=sft.epochs,
        sft_learning_rate=sft.learning_rate, sft_batch_rows=sft.batch_rows,
        sft_skip_repeated_prompts=sft.skip_repeated_prompts, share_prefixes=config.ppo.share_prefixes,
        env=env.name, env_options=env.adapter_options(), train_split=env.train_split,
        history_length=env.history_length, progress_bar=config.logging.progress_bar,
    )


def _eval_metrics(evaluation: dict[str, float | str]) -> dict[str, float | str]:
    """An evaluation's logged names: the figures under ``eval/``, the outcome strings as they are."""
    return {k if k.startswith(OUTCOMES_PREFIX) else f"eval/{k}": v for k, v in evaluation.items()}


class Trainer:
    def __init__(self, config: TrainConfig, workdir: str | Path):
        self.config = config
        try:  # before anything is written: a kernel this platform cannot run (splash on CPU)
            check_attention_impl(config.model.attention_impl, jax.default_backend())
        except ValueError as error:
            raise ConfigError(str(error)) from None
        self.workdir = writable_workdir(Path(workdir).absolute())
        # the library's option objects, built once here and passed down (docs/training.md §1)
        self.runtime = config.runtime_options()
        self.warm_start = warm_start_plan(config)
        self.env_options = config.env.adapter_options()
        self.credit_config = config.credit_config()
        # MVPO's success EMA (docs/credit-family.md): carried across iterations and in the checkpoint
        self.credit_ema = 0.0
        self.checkpointer = Checkpointer(
            self.workdir, config_hash(config), keep=config.run.keep_checkpoints, best_mode=config.run.best_mode,
            config=config_identity(config), allow_config_change=config.run.allow_config_change,
        )
        hosts = jax.process_count()
        if config.env.groups_per_iteration % hosts:
            raise multihost.MultiHostError(
                f"env.groups_per_iteration={config.env.groups_per_iteration} must be a multiple of the "
                f"{hosts} processes (each host plays an equal share of the groups)"
            )
        too_few = {s: n for s, n in dict(config.env.eval_tasks_per_split).items() if 0 < n < hosts}
        if too_few:
            raise multihost.MultiHostError(f"env.eval_tasks_per_split {too_few}: each of the {hosts} hosts needs a task")
        # One device: no mesh at all (the plain single-device path, bit for bit what it always was).
        self.mesh = make_mesh(config.mesh) if jax.device_count() > 1 else None
        model, self.tokenizer = self._warm_started_policy()
        if config.optim.trainable_layers > model.config.num_layers:
            raise ConfigError(f"optim.trainable_layers={config.optim.trainable_layers}: the policy has "
                              f"{model.config.num_layers} decoder layers")
        self.reference = self._reference_policy()
        # The trainer holds the policy as (graphdef, params, opt_state); the jitted step donates the
        # last two and returns their successors (docs/training.md §2).
        self.graphdef, self.params = nnx.split(model)
        self.step = build_train_step(self.graphdef, self.runtime, config.ppo_loss_config(), config.optimizer_config())
        self.opt_state = self.step.tx.init(self.params)
        if self.mesh is None:
            self.jitted_step = jit_train_step(self.step)
        else:  # parameters by the train rules, Adam moments like their parameters, counts replicated
            param_shardings, opt_shardings, _ = train_step_shardings(
                self.step, self.params, logical_sharding(self.mesh, "train"))
            self.opt_state = jax.device_put(self.opt_state, opt_shardings)
            self.jitted_step = jit_train_step(self.step, param_shardings, opt_shardings)
        self.policy = SamplerPolicy(self.model, self.tokenizer, config.sampling_config())
        evaluation = max(dict(config.env.eval_tasks_per_split).values(), default=0)
        self.pool = EnvPool(
            config.env.name,
            max(config.env.groups_per_iteration // hosts * config.env.group_size, -(-evaluation // hosts)),
            num_servers=config.env.num_servers or None, env_options=self.env_options, python=config.env.python,
            step_timeout_s=config.env.step_timeout_s, reset_timeout_s=config.env.reset_timeout_s,
        )

    @property
    def model(self):
        """The current policy as an NNX model (a view of ``params``, valid until the next update)."""
        return nnx.merge(self.graphdef, self.params)

    # ------------------------------------------------------------------ policy set-up

    def _warm_started_policy(self):
        """The policy RL starts from, as a Hugging Face checkpoint in ``workdir/warm_start``.

        Before the first checkpoint the warm start must be complete and built from this config, else
        it is (re)built, saying why; once checkpoints exist it is the run's own, and the checkpoint's
        config check decides whether a changed config may continue."""
        warm_start = self.workdir / WARM_START_DIR
        if multihost.is_lead():
            status, changes = warm_start_status(warm_start, self.warm_start.inputs)
            fresh = self.checkpointer.latest_iteration is None
            if status == "missing" or (fresh and status != "matches"):
                if status == "incomplete":
                    print(f"warm start {warm_start} is incomplete (a run stopped while writing it): rebuilding it",
                          file=sys.stderr)
                elif status == "differs":
                    print(f"warm start {warm_start} was built for another config ({'; '.join(changes)}) and no "
                          "checkpoint exists yet: rebuilding it", file=sys.stderr)
                self._write_warm_start(warm_start)
        multihost.barrier("milegpo_warm_start_written")
        # Fresh and resumed runs both start from the files, so they see identical weights, tokenizer
        # and model config (a resumed run must repeat an uninterrupted one exactly).
        model, _ = load_pretrained(warm_start, self.mesh, runtime=self.runtime)
        return model, load_tokenizer(warm_start)

    def _write_warm_start(self, warm_start: Path) -> None:
        self.sft_history = write_warm_start(self.warm_start, warm_start, tokenizer_dir=self.workdir / "tokenizer")

    def _reference_policy(self):
        if self.config.ppo.kl_coef == 0:
            return None
        model, _ = load_pretrained(self.workdir / WARM_START_DIR, self.mesh, runtime=self.runtime)
        return model

    # ------------------------------------------------------------------ rollouts and evaluation

    def rollout(self, plan: GroupPlan, temperature: float, seed: int, tree: bool = False) -> RolloutBatch:
        """Plays ``plan``: this host its share of the groups, then every host gets the whole batch.
        ``tree``: the groups grow as trees where ``env.branching`` says so (training; eval never forks)."""
        host, hosts = jax.process_index(), jax.process_count()
        if hosts > 1:
            plan = GroupPlan(plan.split, tuple(multihost.host_share(plan.task_ids)),
                             tuple(multihost.host_share(plan.seeds)), plan.group_size)
            seed = _seed(seed, host)
        # the current parameters; under a mesh a copy laid out for decoding on this host's devices
        # (the copy keeps the model's config, so the run's runtime options)
        self.policy.model = self.model if self.mesh is None else multihost.host_local_copy(self.model, self.mesh)
        batch = collect(
            self.pool, self.policy, plan, env=self.config.env.name, max_steps=self.config.env.max_env_steps,
            history_length=self.config.env.history_length, temperature=temperature, seed=seed,
            reward_scale=env_spec(self.config.env.name).reward_scale,
            branching=TreeShape.from_config(self.config.env.branching, plan.group_size) if tree else None,
        )
        self.policy.model = None  # the parameters it views are donated to the next update
        return batch if hosts == 1 else merge_host_batches(multihost.allgather_objects(batch))

    @property
    def _batch_shards(self) -> int:
        """Devices the rows of a micro-batch are split over (sequences per micro-batch are a multiple)."""
        return 1 if self.mesh is None else self.mesh.shape["data"] * self.mesh.shape["fsdp"]

    def _place_rows(self, rows: np.ndarray) -> jax.Array:
        """A host ``[micro-batches, rows, ...]`` array on device: rows split over the batch axes when
        they divide them."""
        if self.mesh is None:
            return jax.numpy.asarray(rows)
        shards = self._batch_shards
        spec = PartitionSpec(None, ("data", "fsdp")) if rows.shape[1] % shards == 0 else PartitionSpec()
        return jax.device_put(rows, NamedSharding(self.mesh, spec))

    def evaluate(self, iteration: int) -> dict[str, float | str]:
        """Every configured eval split, one rollout per task at T = eval_temperature, averaged over the
        eval seeds: success rate, the env's score (WebShop's attribute-match score), the share of
        well-formed responses and, where the env reports task types (ALFWorld), the success rate of
        each type. A count of 0 means every task of the split, played in passes of at most the pool's
        size. ``sampling.eval_greedy`` plays the same tasks again at T = 0 (``greedy/<split>/...``).
        Each task's outcome, in the fixed task order, is returned as a string under ``outcomes/...``
        (``milegpo_jax.train.evaluation``), so evaluations pair task by task."""
        results: dict[str, float | str] = {}
        modes = [(False, self.config.sampling.eval_temperature)] + ([(True, 0.0)] if self.config.sampling.eval_greedy else [])
        splits = {split: list(range(count or self.pool.num_tasks(split)))
                  for split, count in dict(self.config.env.eval_tasks_per_split).items()}
        per_pass = self.pool.num_envs * jax.process_count()  # one-rollout groups: the hosts split any count
        passes = len(modes) * len(self.config.env.eval_seeds) * sum(-(-len(t) // per_pass) for t in splits.values())
        bar = ProgressBar(passes, keys=(), description=f"evaluation {iteration}", enabled=self.config.logging.progress_bar)
        with bar:
            for greedy, temperature in modes:
                for split, tasks in splits.items():
                    per_seed = []
                    for eval_seed in self.config.env.eval_seeds:
                        batch = self._play_tasks(split, tasks, eval_seed, temperature, per_pass, bar)
                        metrics = batch.metrics()
                        figures = {"success_rate": metrics["success_rate"], "score": metrics["score"],
                                   "well_formed_rate": 1.0 - metrics["invalid_action_rate"]}
                        figures.update({f"success_rate/{t}": v for t, v in batch.success_by_task_type().items()})
                        per_seed.append(figures)
                        results[outcome_key(split, eval_seed, greedy)] = outcome_string(batch.episodes, len(tasks))
                    prefix = f"greedy/{split}" if greedy else split
                    for key in sorted({key for figures in per_seed for key in figures}):
                        results[f"{prefix}/{key}"] = float(np.mean([f[key] for f in per_seed if key in f]))
        return results

    def _play_tasks(self, split: str, tasks: list[int], eval_seed: int, temperature: float, per_pass: int,
                    bar: ProgressBar) -> RolloutBatch:
        """One episode per task, in passes of at most ``per_pass`` tasks (the pool's size)."""
        played = []
        for start in range(0, len(tasks), per_pass):
            chunk = tasks[start : start + per_pass]
            plan = GroupPlan(split, tuple(chunk), tuple([eval_seed] * len(chunk)), 1)
            played.append(self.rollout(plan, temperature, _seed(eval_seed, 7) + start))
            bar.update({})
        return merge_passes(played)

    # ------------------------------------------------------------------ one iteration

    def iteration(self, iteration: int) -> dict[str, Any]:
        cfg = self.config
        timings = {}
        start = time.perf_counter()
        plan = GroupPlan.sample(
            cfg.env.train_split, self.pool.num_tasks(cfg.env.train_split), cfg.env.groups_per_iteration,
            cfg.env.group_size, seed=_seed(cfg.run.seed, iteration),
        )
        self.policy.usage.reset()
        batch = self.rollout(plan, cfg.sampling.temperature, _seed(cfg.run.seed, iteration, 1), tree=True)
        timings["time/generation_s"] = time.perf_counter() - start
        # where the rollout's time went (docs/training.md §4): the sampler's prefill and decode, and
        # the rest (env servers, prompts, tokenizing, detokenizing)
        usage = self.policy.usage.reset()
        timings["time/prefill_s"] = usage.prefill_s
        timings["time/decode_s"] = usage.decode_s
        timings["time/env_and_host_s"] = timings["time/generation_s"] - usage.prefill_s - usage.decode_s
        sampler_figures = {
            "sampler/prompt_tokens": usage.prompt_tokens,
            "sampler/prefill_positions": usage.prefill_positions,
            "sampler/generated_tokens": usage.generated_tokens,
        }

        start = time.perf_counter()
        # pre-interned columns, and their steps' responses; in a tree group the columns hold every leaf
        # from the root, and step_of folds a shared step's copies into its one row (docs/credit-implementation.md §5)
        columns, responses, step_of = batch.tree_training_steps()
        credit = compute_credit(columns, self.credit_config, ema_prev=self.credit_ema, step_of=step_of)
        self.credit_ema = credit.ema
        advantages = credit.step_advantages  # entry i is the advantage of responses[i]
        timings["time/advantage_s"] = time.perf_counter() - start

        metrics: dict[str, Any] = {f"rollout/{k}": v for k, v in batch.metrics().items()}
        metrics.update(sampler_figures)
        metrics.update({f"credit/{k}": v for k, v in credit.diagnostics.items() if v is not None})
        adv = np.asarray(advantages, np.float64)
        metrics.update({"advantage/mean": adv.mean(), "advantage/std": adv.std(), "advantage/abs_max": np.abs(adv).max()})

        start = time.perf_counter()
        update_rows = ppo_rows(responses, advantages)
        capacity = sequence_capacity(update_rows)
        sharing = update_sharing(self.model, capacity, cfg.ppo.share_prefixes)
        pad_id = self.tokenizer.pad_token_id
        if self.reference is not None:
            update_rows = with_reference_logprobs(
                self.reference, update_rows, capacity=capacity, max_sequences=cfg.ppo.microbatch_rows, pad_id=pad_id,
                place=self._place_rows, chunk_size=self.runtime.chunk_size, quantum=self._batch_shards, sharing=sharing,
            )
        else:  # no KL term: the reference log-probs are never read
            update_rows = type(update_rows)(update_rows.tokens, {**update_rows.fields, "ref_logprobs": update_rows.fields["old_logprobs"]})
        timings["time/logprob_s"] = time.perf_counter() - start

        start = time.perf_counter()
        trunk = None
        if cfg.optim.trainable_layers and cfg.ppo.share_prefixes:  # the frozen layers once (docs/training.md §3.2)
            trunk = trunk_states(
                self.model, update_rows, layers=self.model.config.num_layers - cfg.optim.trainable_layers,
                capacity=capacity, max_sequences=cfg.ppo.microbatch_rows, pad_id=pad_id, place=self._place_rows,
                sharing=sharing, quantum=self._batch_shards,
            )
            metrics["update/trunk_positions"] = trunk.positions_computed
        rng = np.random.default_rng(_seed(cfg.run.seed, iteration, 2))
        updates, stats = [], UpdateStats()
        for _ in range(cfg.ppo.epochs):
            self.params, self.opt_state, history = ppo_epoch(
                self.jitted_step, self.params, self.opt_state, update_rows, minibatch_rows=cfg.ppo.minibatch_rows,
                microbatch_rows=cfg.ppo.microbatch_rows, capacity=capacity, rng=rng, pad_id=pad_id,
                place=self._place_rows, stats=stats, quantum=self._batch_shards, sharing=sharing,
                row_order=cfg.ppo.row_order, trunk=trunk,
            )
            updates += history
        timings["time/update_s"] = time.perf_counter() - start
        for key in updates[0]:
            metrics[f"actor/{key}"] = float(np.mean([u[key] for u in updates]))
        metrics["update/padding_fraction"] = stats.padding_fraction
        metrics["update/positions_computed"] = stats.computed_tokens
        metrics["update/sharing_factor"] = stats.sharing_factor
        metrics["time/update_tokens_per_s"] = stats.real_tokens / max(timings["time/update_s"], 1e-9)
        metrics.update(timings)
        return metrics

    # ------------------------------------------------------------------ the run

    def _state(self) -> dict[str, Any]:
        # optax states are tuples of named tuples: stored as their numbered leaves, rebuilt by structure
        leaves = jax.tree.leaves(self.opt_state)
        return {"params": nnx.to_pure_dict(self.params),
                "optimizer": {f"{i:05d}": leaf for i, leaf in enumerate(leaves)},
                "credit": {"ema": np.asarray(self.credit_ema, np.float64)}}

    def _load_state(self, state: dict[str, Any]) -> None:
        nnx.replace_by_pure_dict(self.params, state["params"])
        leaves = [state["optimizer"][key] for key in sorted(state["optimizer"])]
        self.opt_state = jax.tree.unflatten(jax.tree.structure(self.opt_state), leaves)
        self.credit_ema = float(state["credit"]["ema"])

    def run(self) -> dict[str, Any]:
        cfg = self.config
        done = 0
        try:
            restored = self.checkpointer.restore(abstract_like(self._state()))
            if restored is not None and restored.meta.iteration > cfg.run.iterations:
                # otherwise the loop below runs nothing and the run "finishes" having done nothing
                raise ConfigMismatchError(
                    f"the newest checkpoint in {self.checkpointer.directory} is of iteration {restored.meta.iteration}, "
                    f"past run.iterations={cfg.run.iterations}: pass --config.run.iterations="
                    f"{restored.meta.iteration} or more to resume, or use a new --workdir")
        except BaseException:  # refused (config changed) or unreadable: stop the env servers now, not at exit
            self.checkpointer.close()
            self.pool.close()
            raise
        if restored is not None:
            self._load_state(restored.state)
            done = restored.meta.iteration
        summary: dict[str, Any] = {"resumed_from": done}
        guard = PreemptionGuard()
        logger = MetricsLogger(self.workdir, done, tensorboard=cfg.logging.tensorboard)
        try:
            if done == 0 and cfg.run.eval_before_training:
                before = self.evaluate(0)
                logger.log(0, _eval_metrics(before))
                summary["eval_before"] = before
            with ProgressBar(cfg.run.iterations, done, keys=PROGRESS_KEYS, description="RL", enabled=cfg.logging.progress_bar) as bar:
                for iteration in range(done + 1, cfg.run.iterations + 1):
                    metrics = self.iteration(iteration)
                    eval_metric = None
                    if cfg.run.eval_every and iteration % cfg.run.eval_every == 0 or iteration == cfg.run.iterations:
                        start = time.perf_counter()
                        evaluation = self.evaluate(iteration)
                        metrics["time/eval_s"] = time.perf_counter() - start
                        metrics.update(_eval_metrics(evaluation))
                        eval_metric = evaluation.get(cfg.run.best_metric)
                        summary["eval_after"] = evaluation
                    bar.update(logger.log(iteration, metrics))
                    stopping = guard.should_stop()
                    if stopping or iteration % cfg.run.save_every == 0 or iteration == cfg.run.iterations:
                        # committed before going on, so a failed write (disk full) stops the run here
                        self.checkpointer.save_now(iteration, self._state(), {"task_cursor": iteration},
                                                   eval_metric=eval_metric)
                    if stopping:
                        summary["stopped_by_signal"] = True
                        break
        finally:
            self.checkpointer.close()
            logger.close()
            guard.uninstall()
            self.pool.close()
        return summary
