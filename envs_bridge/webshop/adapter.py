"""The built-in WebShop behind the ``EnvAdapter`` interface (issue 5, adapter 3).

Tasks are goals of the generated catalog (``catalog.py``), in its fixed shuffled order:

* ``eval_id``: in-distribution goals 0-499 (verl-agent evaluates on WebShop goals ``range(500)``);
* ``train``: in-distribution goals 500 and up (verl-agent trains on ``range(500, n_goals)``);
* ``eval_ood``: WebShop has no out-of-distribution split. Ours holds out whole product types
  (default: ground coffee and office desks, one each from the food and furniture categories whose
  other types are trained on): no train or ``eval_id`` goal targets them, though their products stay
  in the catalog and show up in searches. Up to 500 such goals.

Per step: ``observation`` is the raw page text (``[SEP]``-joined, instruction included);
``admissible_actions`` are what verl-agent puts in the prompt ('search[<your query>]' where there is a
search bar, then 'click[x]' per clickable); ``state_key`` is the page after the instruction prefix,
formatted as verl-agent's ``format_obs`` (docs/environments.md §5.2), which is also the observation the
prompt shows. A purchase ends the episode with ``score`` = WebShop's reward and ``won`` = score 1.0;
``reward`` is 10.0 on a won purchase and 0.0 otherwise (verl-agent's WebShop reward, docs/credit.md §1.2).
Reaching ``max_steps`` actions ends the episode as a failure (``info['truncated']``). Everything is
deterministic, so ``seed`` changes nothing: the K rollouts of a group replay the same goal.

Step info also carries BEACON's milestone flag (``milestones.py``): ``milestone_achieved`` on the step
that completes the next of the phases search / detail / options / purchase, and ``milestone_phase``,
the phase pending after the step ("complete" at the end).
"""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import gc
import pathlib
import threading
import weakref

from envs_bridge.base import EnvAdapter, EnvError, StepResult, check_split
from envs_bridge.webshop.catalog import (
    DEFAULT_NUM_PRODUCTS,
    Catalog,
    Goal,
    generate_catalog,
)
from envs_bridge.webshop.engine import WebShopSession, strip_instruction
from envs_bridge.webshop.milestones import PhaseDetector
from envs_bridge.webshop.nouns import make_noun_tagger
from envs_bridge.webshop.oracle import gold_actions
from envs_bridge.webshop.product_types import PRODUCT_TYPES_BY_KEY
from envs_bridge.webshop.search import ProductSearch

DEFAULT_MAX_STEPS = 15  # verl-agent's WebShop scripts; MileGPO uses 30
EVAL_GOALS = 500
DEFAULT_OOD_PRODUCT_TYPES = ("coffee", "office_desk")
WON_REWARD = 10.0
# Bounds of the reset-time options: a catalog lives in every server process's memory (~1,000 products
# is WebShop's small set; 100,000 is already ~100x that), and a seed is a 32-bit unsigned value.
MAX_EPISODE_STEPS = 10_000
MAX_NUM_PRODUCTS = 100_000
MAX_CATALOG_SEED = 2**32 - 1


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnvError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise EnvError(f"{name} must be {low}..{high}, got {value}")


@dataclasses.dataclass(frozen=True)
class _World:
    """What every env instance of one process shares: the catalog, its index and the task splits."""

    catalog: Catalog
    search: ProductSearch
    splits: dict[str, tuple[Goal, ...]]


# Worlds are shared while env instances use them and freed when the last one closes
# (docs/environments.md §5.1): a 100,000-product catalog takes ~1.2 GB. ``_live`` holds them weakly;
# the one strong reference besides the adapters is ``_recent``, the last world built or used, kept
# only if it is at most ``RECENT_MAX_PRODUCTS`` (WebShop's 1,000-product set: ~12 MB, 0.15 s to build)
# so that a close and create of the usual catalog does not rebuild it.
RECENT_MAX_PRODUCTS = DEFAULT_NUM_PRODUCTS
_live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_recent: list[_World] = []
_worlds_lock = threading.Lock()


def _world(seed: int, num_products: int, catalog_dir: str | None, ood_product_types: tuple[str, ...]) -> _World:
    key = (seed, num_products, catalog_dir, ood_product_types)
    with _worlds_lock:  # one build per key, even when a batch creates its envs on several threads
        world = _live.get(key)
        if world is None:
            world = _build_world(seed, num_products, catalog_dir, ood_product_types)
            _live[key] = world
        _recent[:] = [world] if len(world.catalog.products) <= RECENT_MAX_PRODUCTS else []
        return world


def _return_memory() -> None:
    """Frees a dropped world's cyclic parts (the search index holds cycles) and hands the heap pages
    back to the system (glibc keeps them otherwise, and RSS would not drop)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator decides
        pass


def _build_world(seed: int, num_products: int, catalog_dir: str | None, ood_product_types: tuple[str, ...]) -> _World:
    if catalog_dir is not None:
        catalog = Catalog.load(catalog_dir)
    else:
        catalog = generate_catalog(seed, num_products)
    in_distribution = tuple(goal for goal in catalog.goals if goal.product_type not in ood_product_types)
    held_out = tuple(goal for goal in catalog.goals if goal.product_type in ood_product_types)
    splits = {
        "eval_id": in_distribution[:EVAL_GOALS],
        "train": in_distribution[EVAL_GOALS:],
        "eval_ood": held_out[:EVAL_GOALS],
    }
    return _World(catalog=catalog, search=ProductSearch(catalog.products), splits=splits)


class WebShopAdapter(EnvAdapter):
    name = "webshop"

    def __init__(
        self,
        max_steps: int = DEFAULT_MAX_STEPS,
        catalog_seed: int = 0,
        num_products: int = DEFAULT_NUM_PRODUCTS,
        catalog_dir: str | None = None,
        ood_product_types: tuple[str, ...] | list[str] = DEFAULT_OOD_PRODUCT_TYPES,
        noun_tagger: str = "lexicon",
        spacy_model: str = "en_core_web_sm",
        search_without_search_bar: bool = False,
    ) -> None:
        """
        max_steps: actions per episode before it ends as a failure (15 verl-agent, 30 MileGPO).
        catalog_seed / num_products: the generated catalog; catalog_dir: load a saved one instead.
        ood_product_types: product types held out of train/eval_id for eval_ood (product_types.py keys).
        noun_tagger: 'lexicon' (default, offline) or 'spacy' (WebShop's tagger; needs spaCy + spacy_model).
        search_without_search_bar: let search[...] work on every page, as the original code does.
        """
        _check_int("max_steps", max_steps, 1, MAX_EPISODE_STEPS)
        _check_int("catalog_seed", catalog_seed, 0, MAX_CATALOG_SEED)
        _check_int("num_products", num_products, 1, MAX_NUM_PRODUCTS)
        if catalog_dir is not None and not isinstance(catalog_dir, str):
            raise EnvError(f"catalog_dir must be a path string, got {catalog_dir!r}")
        if isinstance(ood_product_types, str) or not all(isinstance(t, str) for t in ood_product_types):
            raise EnvError(f"ood_product_types must be a list of product type names, got {ood_product_types!r}")
        if not isinstance(noun_tagger, str) or not isinstance(spacy_model, str):
            raise EnvError("noun_tagger and spacy_model must be strings")
        if not isinstance(search_without_search_bar, bool):
            raise EnvError(f"search_without_search_bar must be true or false, got {search_without_search_bar!r}")
        unknown = sorted(set(ood_product_types) - set(PRODUCT_TYPES_BY_KEY))
        if unknown:
            raise EnvError(
                f"unknown product types {unknown} in ood_product_types; known: {sorted(PRODUCT_TYPES_BY_KEY)}"
            )
        if catalog_dir is not None:
            catalog_dir = str(pathlib.Path(catalog_dir).resolve())
        try:
            self._world = _world(catalog_seed, num_products, catalog_dir, tuple(sorted(ood_product_types)))
            self._nouns = make_noun_tagger(noun_tagger, spacy_model)
        except (ValueError, FileNotFoundError, RuntimeError) as error:
            raise EnvError(str(error)) from error
        self.max_steps = max_steps
        self._search_without_search_bar = search_without_search_bar
        self._session: WebShopSession | None = None
        self._steps = 0
        self._done = False

    @property
    def catalog(self) -> Catalog:
        return self._open_world().catalog

    def num_tasks(self, split: str) -> int:
        check_split(split)
        return len(self._open_world().splits[split])

    def _open_world(self) -> _World:
        if self._world is None:
            raise EnvError("this WebShop env is closed")
        return self._world

    def goal(self, split: str, task_id: int) -> Goal:
        check_split(split)
        goals = self._open_world().splits[split]
        if isinstance(task_id, bool) or not isinstance(task_id, int) or not 0 <= task_id < len(goals):
            raise EnvError(f"task id {task_id!r} is out of range for split {split!r} ({len(goals)} tasks)")
        return goals[task_id]

    def reset(self, split: str, task_id: int, seed: int) -> StepResult:
        goal = self.goal(split, task_id)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise EnvError(f"seed must be an integer, got {seed!r}")
        self._session = WebShopSession(
            self._world.catalog, self._world.search, goal, self._nouns, self._search_without_search_bar
        )
        self._steps, self._done = 0, False
        self._milestones = PhaseDetector(self._world.catalog, goal)
        try:  # for tests and diagnostics; never shown to the policy
            gold = gold_actions(self._world.catalog, self._world.search, goal, self._nouns)
        except LookupError:
            gold = None  # a name search finds every generated product; a hand-made catalog might not
        info = {
            "page": self._session.page.value,
            "available_actions": self._session.available_actions(),
            "target_asin": goal.asin,
            "product_type": goal.product_type,
            "gold_actions": gold,
        }
        return self._result(reward=0.0, won=False, score=0.0, info=info)

    def step(self, action: str) -> StepResult:
        if self._session is None:
            raise EnvError("step before reset: call reset(split, task_id, seed) first")
        if self._done:
            raise EnvError("the episode is over: call reset before stepping again")
        if not isinstance(action, str):
            raise EnvError(f"action must be a string, got {type(action).__name__}")
        page_before = self._session.page
        outcome = self._session.step(action)
        milestone = self._milestones.observe(action, page_before, self._session, outcome.purchase)
        self._steps += 1
        truncated = not outcome.done and self._steps >= self.max_steps
        self._done = outcome.done or truncated
        score = outcome.purchase.reward if outcome.purchase is not None else 0.0
        won = outcome.purchase is not None and score == 1.0
        info = {
            "page": self._session.page.value,
            "available_actions": self._session.available_actions(),
            "action_valid": outcome.valid,
            "steps": self._steps,
            "truncated": truncated,
            "milestone_achieved": milestone,  # BEACON: this step completed the next phase (milestones.py)
            "milestone_phase": self._milestones.pending,
        }
        if outcome.purchase is not None:
            info["purchased_asin"] = self._session.asin
            info["selected_options"] = dict(self._session.options)
            info["reward_info"] = outcome.purchase.to_json()
        return self._result(reward=WON_REWARD if won else 0.0, won=won, score=score, info=info)

    def copy_episode(self, other: EnvAdapter) -> bool:
        """A fork by copy (docs/environments.md §7.1): the session and the milestone detector are plain
        Python; the catalog, search index and noun tagger they point to are shared and read-only, so
        they are kept by reference (the memo) and only the episode's own state is copied."""
        if not isinstance(other, WebShopAdapter) or other._world is not self._world or self._session is None:
            return False
        world = self._open_world()
        shared = {id(obj): obj for obj in (world, world.catalog, world.search, self._nouns, self._session.goal)}
        other._session = copy.deepcopy(self._session, dict(shared))
        other._milestones = copy.deepcopy(self._milestones, dict(shared))
        other._steps, other._done = self._steps, self._done
        return True

    def close(self) -> None:
        """Lets go of the shared world: the last env of a catalog to close frees it."""
        if getattr(self, "_world", None) is None:  # closed already, or never built
            return
        self._session = self._milestones = None
        world = weakref.ref(self._world)
        self._world = None
        if world() is None:  # that was the last reference: refcounting freed the world just now
            _return_memory()

    def _result(self, reward: float, won: bool, score: float, info: dict) -> StepResult:
        session = self._session
        assert session is not None
        observation = session.observation()
        return StepResult(
            observation=observation,
            admissible_actions=() if self._done else admissible_actions(session),
            reward=reward,
            done=self._done,
            won=won,
            score=score,
            task=session.instruction,
            state_key=strip_instruction(observation, session.instruction),
            info=info,
        )


def admissible_actions(session: WebShopSession) -> tuple[str, ...]:
    """verl-agent's list: the search template where there is a search bar, then every clickable."""
    available = session.available_actions()
    search = ("search[<your query>]",) if available["has_search_bar"] else ()
    return search + tuple(f"click[{text}]" for text in available["clickables"])

