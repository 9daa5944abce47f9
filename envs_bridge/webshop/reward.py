"""WebShop's purchase reward, rule for rule (docs/environments.md §5.4).

reward = r_type * (A + O + P) / D with D = |goal attributes| + |goal options| + 1, where

* A counts goal attributes matched by the product: fuzzy score F > 85 against one of its attributes,
  or else the attribute (as written) is a substring of the lower-cased title, bullet points or
  description;
* O counts goal options matched by some selected option value, both colour-normalised first (the
  dict form of synthetic goals compares "name value" text unless an item is itself a colour word);
* P is 1 when the price is within the bound (equality counts);
* r_type is 1, 0.5, 0.1 or 0 from the query, the category breadcrumb and the noun overlap of the names.

F is thefuzz's ``token_set_ratio`` (an integer after rounding), which the rules are written against.
Where WebShop itself would crash (no goal attributes: ZeroDivisionError; a bound <= 0: TypeError)
this module raises ``RewardError`` with the reason instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from thefuzz import fuzz

from envs_bridge.webshop.catalog import Goal, Product
from envs_bridge.webshop.nouns import NounTagger, lexicon_nouns

MATCH_THRESHOLD = 85  # a fuzzy match needs a score strictly above this

# WebShop's colour vocabulary (web_agent_site/engine/normalize.py), in its alphabetical order: a value
# is replaced by the first of these that occurs in it as a substring.
COLOR_WORDS = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue",
    "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral",
    "cranberry", "cream", "crystal", "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia",
    "gold", "granite", "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo",
    "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime", "magenta",
    "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom", "mustard",
    "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple",
    "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull",
    "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)

GoalOption = str | tuple[str, str]  # list-form goal option, or one (name, value) item of a dict-form goal


class RewardError(ValueError):
    """A goal the reward is undefined for (WebShop would crash on it)."""


@dataclasses.dataclass(frozen=True)
class RewardBreakdown:
    reward: float  # the WebShop score in [0, 1]
    r_type: float
    r_att: float
    r_option: float | None  # None when the goal has no options
    r_price: bool
    num_attr_matches: int
    num_option_matches: int
    query_match: bool
    category_match: bool
    title_score: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def fuzzy_score(first: str, second: str) -> int:
    return fuzz.token_set_ratio(first, second)


def normalize_color(value: str) -> str:
    """The first colour word contained in ``value`` ('navy blue' -> 'blue'), else ``value`` unchanged."""
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value


def _normalize_goal_option(option: GoalOption) -> str:
    if isinstance(option, str):
        return normalize_color(option)
    # Dict form: WebShop hands the (name, value) pair itself to the normaliser, where "in" tests tuple
    # membership, so only an item that *is* a colour word is normalised; otherwise the pair is fuzzy
    # matched as its text "name value".
    for color in COLOR_WORDS:
        if color in option:
            return color
    name, value = option
    return f"{name} {value}"


def count_attribute_matches(product: Product, goal_attributes: Sequence[str]) -> int:
    title = product.name.lower()
    bullets = " ".join(product.small_description).lower()
    description = product.full_description.lower()
    matches = 0
    for goal_attribute in goal_attributes:
        if any(fuzzy_score(attribute, goal_attribute) > MATCH_THRESHOLD for attribute in product.reward_attributes):
            matches += 1
        elif goal_attribute in title or goal_attribute in bullets or goal_attribute in description:
            matches += 1  # plain substring of the goal attribute as written ('slim fit' in 'slim fitting')
    return matches


def count_option_matches(selected_values: Sequence[str], goal_options: Sequence[GoalOption]) -> int:
    """Goal options hit by some selected value; one selected value may satisfy several goal options."""
    selected = [normalize_color(value) for value in selected_values]
    matches = 0
    for goal_option in goal_options:
        target = _normalize_goal_option(goal_option)
        if any(fuzzy_score(value, target) > MATCH_THRESHOLD for value in selected):
            matches += 1
    return matches


def type_factor(product: Product, goal: Goal, nouns: NounTagger = lexicon_nouns) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score) of buying ``product`` for ``goal``."""
    query_match = product.query == goal.query
    product_path = {part.strip() for part in product.product_category.split("›")}
    goal_path = {part.strip() for part in goal.product_category.split("›")}
    category_match = len(product_path & goal_path) >= 2
    goal_nouns = nouns(goal.name)
    if goal_nouns:
        title_score = len(set(nouns(product.name)) & set(goal_nouns)) / len(goal_nouns)
    else:
        title_score = 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    # The title overrides query and category matches.
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def webshop_reward(
    product: Product,
    goal: Goal,
    price: float,
    selected_options: Mapping[str, str],
    nouns: NounTagger = lexicon_nouns,
) -> RewardBreakdown:
    """The score of buying ``product`` at ``price`` with ``selected_options`` {option name: value}."""
    if not goal.attributes:
        raise RewardError(f"goal for {goal.asin} has no attributes: WebShop's reward divides by their number")
    if goal.price_upper <= 0:
        raise RewardError(f"goal for {goal.asin} has price bound {goal.price_upper}: the reward needs a bound > 0")
    r_type, query_match, category_match, title_score = type_factor(product, goal, nouns)
    num_attr_matches = count_attribute_matches(product, goal.attributes)
    # Only the selected values count, never the option names they were selected under.
    num_option_matches = count_option_matches(list(selected_options.values()), goal.goal_options)
    r_price = price <= goal.price_upper
    denominator = len(goal.attributes) + len(goal.goal_options) + 1
    reward = (num_attr_matches + num_option_matches + int(r_price)) / denominator * r_type
    return RewardBreakdown(
        reward=reward,
        r_type=r_type,
        r_att=num_attr_matches / len(goal.attributes),
        r_option=num_option_matches / len(goal.goal_options) if goal.goal_options else None,
        r_price=r_price,
        num_attr_matches=num_attr_matches,
        num_option_matches=num_option_matches,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )
