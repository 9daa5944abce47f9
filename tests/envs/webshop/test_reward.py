"""WebShop's reward on hand-checked cases (docs/environments.md §5.4)."""

import dataclasses

import pytest

from envs_bridge.webshop.catalog import Goal, Product
from envs_bridge.webshop.nouns import lexicon_nouns
from envs_bridge.webshop.reward import (
    COLOR_WORDS,
    RewardError,
    count_attribute_matches,
    count_option_matches,
    fuzzy_score,
    normalize_color,
    type_factor,
    webshop_reward,
)

CHAIR_PATH = "Home & Kitchen › Furniture › Living Room Furniture › Chairs › Accent Chairs"

CHAIR = Product(
    asin="B000000001",
    name="Maple Mid Century Accent Chair - PU Leather Armchair for Living Room",
    full_description="A comfortable chair with a solid wood frame.",
    small_description=("PU LEATHER - easy to clean.", "Ships in one box."),
    pricing="$120.00",
    options=(("color", ("grey", "dark grey", "navy blue")),),
    category="furniture",
    query="accent chairs",
    product_category=CHAIR_PATH,
    attributes=("pu leather", "living room"),
    product_type="accent_chair",
    price=120.0,
    rating="N.A.",
    reviews=(),
)

GOAL = Goal(
    asin=CHAIR.asin,
    product_type="accent_chair",
    category="furniture",
    query="accent chairs",
    name=CHAIR.name,
    product_category=CHAIR_PATH,
    instruction_text="i am looking for accent chair that is pu leather and high density foam with color: grey, "
    "and price lower than 130.00 dollars",
    attributes=("pu leather", "high density foam"),
    goal_options=(("color", "grey"),),
    price_upper=130.0,
    search_query="accent chair that is pu leather and high density foam with color: grey",
)


def test_fuzzy_score_follows_the_token_set_rule():
    # Shared tokens with one set inside the other: 100.
    assert fuzzy_score("Navy", "color navy blue") == 100
    assert fuzzy_score("large", "size x-large") == 100  # '-' becomes a space: {size, x, large}
    # No shared token: plain ratio of the joined rests, 100 * (1 - indel / (4 + 4)) = 75.
    assert fuzzy_score("grey", "gray") == 75
    # S = "of pack", X = "2", Y = "12": max(87.5, 82.35, 94.74) rounds to 95.
    assert fuzzy_score("pack of 2", "pack of 12") == 95


def test_color_normalization_takes_the_first_alphabetical_color_word_contained():
    assert len(COLOR_WORDS) == 102 and list(COLOR_WORDS) == sorted(COLOR_WORDS)
    assert normalize_color("navy blue") == "blue"
    assert normalize_color("washed black") == "ash"  # 'ash' is inside 'washed'
    assert normalize_color("dark grey") == "dark"
    assert normalize_color("16 ounce") == "16 ounce"  # no colour word: unchanged


def test_goal_met_in_full_scores_one():
    full = dataclasses.replace(CHAIR, attributes=("pu leather", "high density foam"))
    result = webshop_reward(full, GOAL, price=120.0, selected_options={"color": "grey"})
    assert result.reward == 1.0
    assert (result.r_type, result.num_attr_matches, result.num_option_matches, result.r_price) == (1.0, 2, 1, True)


def test_partial_attributes_count_over_attributes_options_and_price():
    # 'high density foam' is neither an attribute nor in the text: (1 + 1 + 1) / (2 + 1 + 1).
    result = webshop_reward(CHAIR, GOAL, price=120.0, selected_options={"color": "grey"})
    assert result.num_attr_matches == 1
    assert result.reward == pytest.approx(0.75)
    assert result.r_att == 0.5 and result.r_option == 1.0


def test_attribute_substring_fallback_uses_the_goal_attribute_as_written():
    product = dataclasses.replace(CHAIR, name="Slim Fitting Jeans", attributes=(), small_description=(),
                                  full_description="")
    assert product.reward_attributes == ("DUMMY_ATTR",)
    assert count_attribute_matches(product, ["slim fit"]) == 1  # plain substring of 'slim fitting jeans'
    assert count_attribute_matches(product, ["Slim Fit"]) == 0  # not lower-cased: no match
    in_bullets = dataclasses.replace(product, small_description=("Made of HIGH DENSITY FOAM",))
    assert count_attribute_matches(in_bullets, ["high density foam"]) == 1
    in_description = dataclasses.replace(product, full_description="Has High Density Foam.")
    assert count_attribute_matches(in_description, ["high density foam"]) == 1


def test_price_over_budget_loses_the_price_term_and_equality_counts():
    full = dataclasses.replace(CHAIR, attributes=("pu leather", "high density foam"))
    over = webshop_reward(full, GOAL, price=130.01, selected_options={"color": "grey"})
    assert not over.r_price and over.reward == pytest.approx(3 / 4)
    assert webshop_reward(full, GOAL, price=130.0, selected_options={"color": "grey"}).reward == 1.0


def test_option_matching_dict_form_quirks():
    # A pair with an item that is a colour word is normalised to that word.
    assert count_option_matches(["grey"], [("color", "grey")]) == 1
    assert count_option_matches(["dark grey"], [("color", "grey")]) == 0  # selected side becomes 'dark'
    # Otherwise the pair is compared as 'name value': 'navy' matches 'navy blue' ...
    assert count_option_matches(["navy"], [("color", "navy blue")]) == 1
    assert count_option_matches(["large"], [("size", "x-large")]) == 1
    # ... but not in the list form, where 'navy blue' is normalised to 'blue'.
    assert count_option_matches(["navy"], ["navy blue"]) == 0
    # One selected value may satisfy several goal options.
    assert count_option_matches(["sky blue"], ["navy blue", "royal blue"]) == 2
    assert count_option_matches([], [("color", "grey")]) == 0


def test_only_selected_values_count_never_their_option_names():
    full = dataclasses.replace(CHAIR, attributes=("pu leather", "high density foam"))
    assert webshop_reward(full, GOAL, 120.0, {"some other name": "grey"}).reward == 1.0
    missing = webshop_reward(full, GOAL, 120.0, {})
    assert missing.num_option_matches == 0 and missing.reward == pytest.approx(3 / 4)


def _typed(name: str, query: str = "other query", path: str = "Toys › Games") -> Product:
    return dataclasses.replace(CHAIR, name=name, query=query, product_category=path)


def test_wrong_type_scores_zero():
    sneaker = _typed("Stridex Running Shoes")
    r_type, query_match, category_match, title_score = type_factor(sneaker, GOAL)
    assert (query_match, category_match, title_score, r_type) == (False, False, 0.0, 0.0)
    full = dataclasses.replace(sneaker, attributes=("pu leather", "high density foam"))
    assert webshop_reward(full, GOAL, 10.0, {"color": "grey"}).reward == 0.0


def test_type_factor_thresholds():
    goal = dataclasses.replace(GOAL, name="Alpha Bravo Charlie Delta Echo Foxtrot")  # six nouns
    # 1 of 6 nouns shared (0.167): above 0.1 but not above 0.2, no query/category match -> 0.5.
    assert type_factor(_typed("Alpha Zulu"), goal)[0] == 0.5
    # The same title with the query matching -> 1.0; with two shared breadcrumb levels -> 1.0.
    assert type_factor(_typed("Alpha Zulu", query=goal.query), goal)[0] == 1.0
    assert type_factor(_typed("Alpha Zulu", path="Chairs › X › Furniture"), goal)[0] == 1.0
    # 2 of 6 shared (0.33 > 0.2) -> 1.0 without any other match.
    assert type_factor(_typed("Alpha Bravo"), goal)[0] == 1.0
    ten_nouns = "Kilo Lima Mike November Oscar Papa Quebec Romeo Sierra Tango"
    r_type, _, _, title_score = type_factor(_typed("Kilo"), dataclasses.replace(GOAL, name=ten_nouns))
    assert (title_score, r_type) == (0.1, 0.5)  # 0.1 is not < 0.1
    eleven = dataclasses.replace(GOAL, name=ten_nouns + " Uniform")
    # 1/11 < 0.1 gives 0.1 and overrides the query match.
    assert type_factor(_typed("Kilo", query=eleven.query), eleven)[0] == 0.1


def test_goal_name_without_nouns_gives_title_score_point_two():
    goal = dataclasses.replace(GOAL, name="for and with 42")
    assert lexicon_nouns(goal.name) == []
    r_type, _, _, title_score = type_factor(_typed("Zulu", query=goal.query), goal)
    assert (title_score, r_type) == (0.2, 1.0)
    assert type_factor(_typed("Zulu"), goal)[0] == 0.5  # 0.2 is not > 0.2


def test_category_match_needs_two_shared_levels_in_any_order():
    assert type_factor(_typed("Zulu", path="Accent Chairs › Toys › Furniture"), GOAL)[2] is True
    assert type_factor(_typed("Zulu", path="Furniture › Toys"), GOAL)[2] is False


def test_undefined_goals_raise_a_clear_error():
    with pytest.raises(RewardError, match="no attributes"):
        webshop_reward(CHAIR, dataclasses.replace(GOAL, attributes=()), 120.0, {})
    with pytest.raises(RewardError, match="price bound"):
        webshop_reward(CHAIR, dataclasses.replace(GOAL, price_upper=0.0), 120.0, {})


def test_noun_lexicon_splits_like_spacy_and_keeps_duplicates():
    assert lexicon_nouns("Urban Loom Casual T-Shirt - Short Sleeve T-Shirt for Women") == [
        "urban", "loom", "casual", "t", "shirt", "short", "sleeve", "t", "shirt", "women",
    ]
    assert lexicon_nouns("Sunny Orchard Salted Almonds - Resealable Bag Almonds for Snacking") == [
        "sunny", "orchard", "almonds", "bag", "almonds",
    ]
