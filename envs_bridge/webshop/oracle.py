"""The gold action sequence of a goal: what an expert shopper types, used by tests and diagnostics.

Search the goal's own words (the instruction without its lead-in and price clause, as in WebShop's
example episodes), page forward to the target product, open it, click each goal option, buy. When the
target is not among the 50 hits, the first hit whose purchase with the goal options scores 1.0 is
bought instead (WebShop rewards any product that satisfies the goal); failing that, the target's name
is searched.
"""

from __future__ import annotations

from envs_bridge.webshop.catalog import Catalog, Goal, Product
from envs_bridge.webshop.engine import PRODUCTS_PER_PAGE
from envs_bridge.webshop.nouns import NounTagger, lexicon_nouns
from envs_bridge.webshop.reward import webshop_reward
from envs_bridge.webshop.search import ProductSearch


def _goal_selection(product: Product, goal: Goal) -> dict[str, str]:
    """The goal options this product offers, as {option name: value}."""
    offered = dict(product.options)
    return {name: value for name, value in goal.goal_options if value in offered.get(name, ())}


def _scores_full_marks(product: Product, goal: Goal, nouns: NounTagger) -> bool:
    return webshop_reward(product, goal, product.price, _goal_selection(product, goal), nouns).reward == 1.0


def gold_actions(catalog: Catalog, search: ProductSearch, goal: Goal, nouns: NounTagger = lexicon_nouns) -> list[str]:
    for query in (goal.search_query, goal.name.lower()):
        hits = search.search(query)
        if goal.asin in hits:
            rank = hits.index(goal.asin)
        else:
            rank = next((index for index, asin in enumerate(hits)
                         if _scores_full_marks(catalog.product(asin), goal, nouns)), None)
        if rank is not None:
            product = catalog.product(hits[rank])
            return [
                f"search[{query}]",
                *["click[next >]"] * (rank // PRODUCTS_PER_PAGE),
                f"click[{product.asin.lower()}]",
                *[f"click[{value}]" for value in _goal_selection(product, goal).values()],
                "click[buy now]",
            ]
    raise LookupError(f"no search finds a product that satisfies the goal for {goal.asin}: {goal.instruction_text!r}")
