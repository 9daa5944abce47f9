"""A seeded WebShop catalog: products in WebShop's schema plus synthetic goals in WebShop's style.

The original WebShop data (``items_shuffle_1000.json`` products, ``items_ins_v2_1000.json`` attributes
and instructions; docs/environments.md §5.1) cannot be fetched offline, so this module generates a
catalog of the same shape from the vocabularies in ``product_types.py``:

* a product carries ``asin``, ``name``, ``full_description``, ``small_description`` (bullet points),
  ``pricing`` ("$12.99" or "$10.99 - $18.99"), ``customization_options`` {option: [{value, image}]},
  ``category``, ``query``, ``product_category`` ("A › B › C") and its ``attributes``; plus the fields
  WebShop derives at load time (the parsed price list, the drawn price, lower-cased options, rating,
  reviews);
* a goal is built the way WebShop builds synthetic goals: one base instruction per product naming
  1-3 of its attributes, one goal per combination of the product's option values (" with color: grey,
  and size: large"), and a price bound drawn from the 2nd-4th multiple of $10 above the product's
  price (", and price lower than 130.00 dollars"; no bound above $980, as in WebShop).

Everything is a pure function of ``seed`` (Python's ``random.Random``; nothing iterates over a set),
so every process, whatever its hash seed, builds the same catalog. Generation of the default
1,000 products and their goals takes well under a second, so the catalog lives in memory; ``save`` /
``load`` write and read it as JSON in WebShop's file layout for inspection or for the original code
(``python -m envs_bridge.webshop.catalog --out DIR``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import math
import pathlib
import random
import string
from typing import Any

from envs_bridge.webshop.product_types import (
    PRODUCT_TYPES,
    PRODUCT_TYPES_BY_KEY,
    ProductType,
)

DEFAULT_NUM_PRODUCTS = 1000  # verl-agent trains on WebShop's 1,000-product set (use_small)
PRICE_STEPS = tuple(10.0 * i for i in range(1, 100))  # WebShop's candidate price bounds: $10 .. $990
NO_PRICE_BOUND = 1000000.0  # WebShop's bound when no candidate is left (products above $980)
NO_RATING = "N.A."
PRODUCTS_FILE = "items_shuffle.json"
ATTRIBUTES_FILE = "items_ins_v2.json"
GOALS_FILE = "goals.json"
META_FILE = "catalog_meta.json"

# Lead-ins of synthetic instructions; WebShop's read like "i am looking for ... that is ...".
_INSTRUCTION_LEADS = (
    "i am looking for", "i need", "i want to buy", "i'm looking for", "find me", "i would like",
    "i want", "looking for",
)


@dataclasses.dataclass(frozen=True)
class Review:
    title: str
    score: int  # 1..5 stars
    body: str


@dataclasses.dataclass(frozen=True)
class Product:
    """One product: WebShop's raw fields plus what WebShop derives from them when it loads the file."""

    asin: str
    name: str  # also WebShop's ``Title``
    full_description: str  # WebShop's ``Description`` (may be '')
    small_description: tuple[str, ...]  # WebShop's ``BulletPoints``
    pricing: str  # raw pricing string
    options: tuple[tuple[str, tuple[str, ...]], ...]  # (option name, values), lower-case, page order
    category: str
    query: str
    product_category: str
    attributes: tuple[str, ...]  # items_ins_v2 "attributes"
    product_type: str  # key into PRODUCT_TYPES
    price: float  # the price the reward checks: pricing[0], or a draw inside the range
    rating: str  # "4.3" or "N.A."
    reviews: tuple[Review, ...]

    @property
    def price_list(self) -> list[float]:
        return [float(part.strip().strip("-").strip()) for part in self.pricing.split("$")[1:]]

    @property
    def price_tag(self) -> str:
        # WebShop prints floats with Python's repr: "$12.99", "$15.0", "$10.99 to $18.99".
        prices = self.price_list
        return f"${prices[0]}" if len(prices) == 1 else f"${prices[0]} to ${prices[1]}"

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option_name for option_name, _ in self.options)

    def option_values(self, option_name: str) -> tuple[str, ...]:
        return dict(self.options)[option_name]

    @property
    def reward_attributes(self) -> tuple[str, ...]:
        # WebShop substitutes ['DUMMY_ATTR'] for a product without attributes.
        return self.attributes or ("DUMMY_ATTR",)

    def to_raw(self) -> dict[str, Any]:
        """The product as a record of WebShop's ``items_shuffle`` file."""
        return {
            "asin": self.asin,
            "name": self.name,
            "full_description": self.full_description,
            "small_description": list(self.small_description),
            "pricing": self.pricing,
            "customization_options": {
                option_name: [{"value": value, "image": None} for value in values]
                for option_name, values in self.options
            } or None,
            "images": [""],
            "category": self.category,
            "query": self.query,
            "product_category": self.product_category,
            # Fields the original file does not have; kept so ``load`` can rebuild exactly this catalog.
            "product_type": self.product_type,
            "price": self.price,
            "rating": self.rating,
            "reviews": [dataclasses.asdict(review) for review in self.reviews],
        }

    @classmethod
    def from_raw(cls, raw: dict[str, Any], attributes: list[str]) -> Product:
        options = raw.get("customization_options") or {}
        return cls(
            asin=raw["asin"],
            name=raw["name"],
            full_description=raw["full_description"],
            small_description=tuple(raw["small_description"]),
            pricing=raw["pricing"],
            options=tuple((name, tuple(item["value"] for item in values)) for name, values in options.items()),
            category=raw["category"],
            query=raw["query"],
            product_category=raw["product_category"],
            attributes=tuple(attributes),
            product_type=raw["product_type"],
            price=float(raw["price"]),
            rating=raw["rating"],
            reviews=tuple(Review(**review) for review in raw["reviews"]),
        )


@dataclasses.dataclass(frozen=True)
class Goal:
    """A synthetic WebShop goal: what to buy, with which options, under which price."""

    asin: str  # the product the goal was written from (other products may satisfy it too)
    product_type: str
    category: str
    query: str
    name: str  # the target product's name (WebShop's goal ``name`` is the product ``Title``)
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]  # the instruction attributes the reward checks
    goal_options: tuple[tuple[str, str], ...]  # (option name, value), option names sorted
    price_upper: float
    search_query: str  # the instruction without lead-in and price clause: what a competent agent searches

    @property
    def goal_options_dict(self) -> dict[str, str]:
        return dict(self.goal_options)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["attributes"] = list(self.attributes)
        data["goal_options"] = dict(self.goal_options)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Goal:
        fields = dict(data)
        fields["attributes"] = tuple(data["attributes"])
        fields["goal_options"] = tuple(data["goal_options"].items())
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class Catalog:
    seed: int
    products: tuple[Product, ...]
    goals: tuple[Goal, ...]  # shuffled once, like WebShop's goal list

    @functools.cached_property
    def products_by_asin(self) -> dict[str, Product]:
        return {product.asin: product for product in self.products}

    def product(self, asin: str) -> Product:
        try:
            return self.products_by_asin[asin]
        except KeyError:
            raise KeyError(f"no product with asin {asin!r} in the catalog") from None

    # --- JSON files -------------------------------------------------------------------------------

    def save(self, directory: str | pathlib.Path) -> pathlib.Path:
        """Writes the catalog in WebShop's file layout (plus our goals) and returns the directory."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        _write_json(directory / PRODUCTS_FILE, [product.to_raw() for product in self.products])
        instructions = _base_instructions(self.goals)
        _write_json(directory / ATTRIBUTES_FILE, {
            product.asin: {
                "attributes": list(product.attributes),
                "instruction": instructions.get(product.asin, ("", []))[0],
                "instruction_attributes": instructions.get(product.asin, ("", []))[1],
            }
            for product in self.products
        })
        _write_json(directory / GOALS_FILE, [goal.to_json() for goal in self.goals])
        _write_json(directory / META_FILE, {"seed": self.seed, "num_products": len(self.products)})
        return directory

    @classmethod
    def load(cls, directory: str | pathlib.Path) -> Catalog:
        directory = pathlib.Path(directory)
        missing = [name for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, GOALS_FILE, META_FILE)
                   if not (directory / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{directory} is not a saved WebShop catalog: missing {', '.join(missing)}")
        raw_products = _read_json(directory / PRODUCTS_FILE)
        attributes = _read_json(directory / ATTRIBUTES_FILE)
        products = tuple(Product.from_raw(raw, attributes[raw["asin"]]["attributes"]) for raw in raw_products)
        goals = tuple(Goal.from_json(goal) for goal in _read_json(directory / GOALS_FILE))
        return cls(seed=_read_json(directory / META_FILE)["seed"], products=products, goals=goals)


# --- generation ------------------------------------------------------------------------------------


def generate_catalog(seed: int = 0, num_products: int = DEFAULT_NUM_PRODUCTS) -> Catalog:
    """Builds products round-robin over the product types, then their goals, all from ``seed``."""
    if num_products < len(PRODUCT_TYPES):
        raise ValueError(
            f"num_products must be at least {len(PRODUCT_TYPES)} (one per product type), got {num_products}"
        )
    rng = random.Random(f"webshop-catalog-{seed}")
    asins = _unique_asins(rng, num_products)
    products = tuple(
        _make_product(rng, PRODUCT_TYPES[index % len(PRODUCT_TYPES)], asins[index]) for index in range(num_products)
    )
    goals = [goal for product in products for goal in _make_goals(rng, product)]
    rng.shuffle(goals)  # WebShop shuffles its goal list once with a fixed seed
    return Catalog(seed=seed, products=products, goals=tuple(goals))


@functools.lru_cache(maxsize=4)
def cached_catalog(seed: int = 0, num_products: int = DEFAULT_NUM_PRODUCTS) -> Catalog:
    """One catalog per (seed, size) per process: every env instance of a server shares it."""
    return generate_catalog(seed, num_products)


def _unique_asins(rng: random.Random, count: int) -> list[str]:
    alphabet = string.digits + string.ascii_uppercase
    asins: list[str] = []
    seen: set[str] = set()
    while len(asins) < count:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in seen:
            seen.add(asin)
            asins.append(asin)
    return asins


def _title(text: str) -> str:
    return " ".join(word if word.isupper() else word[:1].upper() + word[1:] for word in text.split())


def _make_product(rng: random.Random, product_type: ProductType, asin: str) -> Product:
    brand = rng.choice(product_type.brands)
    style = rng.choice(product_type.styles)
    noun = rng.choice(product_type.type_nouns)
    use = rng.choice(product_type.uses)
    attributes = tuple(rng.sample(product_type.attributes, rng.randint(3, 5)))
    in_name = attributes[: rng.randint(1, 2)]
    name = f"{brand} {style} {noun} - {', '.join(_title(attribute) for attribute in in_name)} {noun} for {use}"

    bullets = [
        f"{attribute.upper()} - {rng.choice(_BULLET_SENTENCES).format(noun=noun.lower(), use=use.lower())}"
        for attribute in attributes
    ]
    bullets.append(f"WHAT YOU GET - one {brand} {noun.lower()}, designed for {use.lower()}.")
    description = "" if rng.random() < 0.1 else (
        f"The {brand} {noun} is a {style.lower()} {noun.lower()} made for {use.lower()}. "
        f"It is {_join_and(list(attributes))}. {rng.choice(_DESCRIPTION_CLOSERS)}"
    )

    options = []
    for option_name, values in product_type.option_groups:
        if rng.random() < 0.9:
            count = rng.randint(2, min(5, len(values)))
            chosen = set(rng.sample(values, count))
            options.append((option_name, tuple(value for value in values if value in chosen)))

    low, high = product_type.price_range
    first = _shop_price(rng.uniform(low, high), rng)
    if rng.random() < 0.25:
        second = _shop_price(first * rng.uniform(1.15, 1.8), rng)
        pricing = f"${first:.2f} - ${second:.2f}"
        price = round(rng.uniform(first, second), 2)  # WebShop draws the price inside a range once at load
    else:
        pricing, price = f"${first:.2f}", first

    reviews: tuple[Review, ...] = ()
    rating = NO_RATING
    if rng.random() < 0.4:
        reviews = tuple(
            Review(title=title, score=score, body=body.format(noun=noun.lower()))
            for title, score, body in rng.sample(_REVIEWS, rng.randint(1, 3))
        )
        rating = f"{sum(review.score for review in reviews) / len(reviews):.1f}"

    return Product(
        asin=asin,
        name=name,
        full_description=description,
        small_description=tuple(bullets),
        pricing=pricing,
        options=tuple(options),
        category=product_type.category,
        query=rng.choice(product_type.queries),
        product_category=product_type.product_category,
        attributes=attributes,
        product_type=product_type.key,
        price=price,
        rating=rating,
        reviews=reviews,
    )


def _shop_price(value: float, rng: random.Random) -> float:
    return round(math.floor(value) + rng.choice((0.99, 0.49, 0.95, 0.0)), 2)


def _join_and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _make_goals(rng: random.Random, product: Product) -> list[Goal]:
    """WebShop's synthetic goals of one product: one per combination of its option values."""
    product_type = PRODUCT_TYPES_BY_KEY[product.product_type]
    picked = rng.sample(product.attributes, rng.randint(1, min(3, len(product.attributes))))
    instruction_attributes = tuple(attribute for attribute in product.attributes if attribute in picked)
    type_phrase = _type_phrase(product, product_type)
    lead = rng.choice(_INSTRUCTION_LEADS)
    verb = rng.choice(("that is", "that is", "which is", "with"))
    described = f"{type_phrase} {verb} {_join_and(list(instruction_attributes))}"

    # WebShop: candidates are the multiples of $10 above the price, keep the first four, sample two and
    # take the larger as the bound; fewer than two candidates means no price clause.
    candidates = [step for step in PRICE_STEPS if step > product.price][:4]
    price_upper = max(rng.sample(candidates, 2)) if len(candidates) >= 2 else NO_PRICE_BOUND
    price_text = _price_clause(price_upper)

    option_names = sorted(product.option_names)
    goals = []
    for combination in itertools.product(*(product.option_values(name) for name in option_names)):
        goal_options = tuple(zip(option_names, combination))
        option_text = _option_clause(goal_options)
        goals.append(Goal(
            asin=product.asin,
            product_type=product.product_type,
            category=product.category,
            query=product.query,
            name=product.name,
            product_category=product.product_category,
            instruction_text=f"{lead} {described}{option_text}{price_text}",
            attributes=instruction_attributes,
            goal_options=goal_options,
            price_upper=price_upper,
            search_query=f"{described}{option_text}",
        ))
    return goals


def _type_phrase(product: Product, product_type: ProductType) -> str:
    for noun in product_type.type_nouns:
        if f" {noun} -" in product.name:
            return noun.lower()
    raise AssertionError(f"product {product.asin} has no type noun of {product_type.key} in its name")


def _option_clause(goal_options: tuple[tuple[str, str], ...]) -> str:
    option_text = ", and ".join(f"{name}: {value}" for name, value in goal_options)
    return f" with {option_text}" if option_text else ""


def _price_clause(price_upper: float) -> str:
    return "" if price_upper == NO_PRICE_BOUND else f", and price lower than {price_upper:.2f} dollars"


def _base_instructions(goals: tuple[Goal, ...]) -> dict[str, tuple[str, list[str]]]:
    """Per product, the instruction without option and price clauses (items_ins_v2's "instruction")."""
    bases: dict[str, tuple[str, list[str]]] = {}
    for goal in goals:
        if goal.asin not in bases:
            suffix = _option_clause(goal.goal_options) + _price_clause(goal.price_upper)
            bases[goal.asin] = (goal.instruction_text.removesuffix(suffix), list(goal.attributes))
    return bases


def _write_json(path: pathlib.Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def _read_json(path: pathlib.Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


_BULLET_SENTENCES = (
    "a {noun} you can count on for {use}, built to last through daily use.",
    "thoughtfully designed so the {noun} stays comfortable and reliable for {use}.",
    "every detail of this {noun} was tested for {use}.",
    "premium quality materials make this {noun} a great choice for {use}.",
    "our best selling {noun}, loved by customers for {use}.",
)
_DESCRIPTION_CLOSERS = (
    "Satisfaction guaranteed: if you are not happy, contact us for a replacement or refund.",
    "A thoughtful gift for family and friends.",
    "Backed by our one year warranty and friendly customer service.",
    "Please allow small differences in color due to lighting and monitor settings.",
)
_REVIEWS = (
    ("Exactly as described", 5, "This {noun} is exactly what I wanted. Would buy again."),
    ("Great value", 5, "Good quality {noun} for the price."),
    ("Pretty good", 4, "The {noun} works well, shipping was a bit slow."),
    ("Okay", 3, "The {noun} is fine but not as nice as the pictures."),
    ("Disappointed", 2, "The {noun} stopped being useful after a few weeks."),
    ("Not for me", 1, "Returned the {noun}, it did not match the description."),
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate a WebShop catalog and write it as JSON.")
    parser.add_argument("--out", required=True, help="directory for items_shuffle.json, items_ins_v2.json, goals.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-products", type=int, default=DEFAULT_NUM_PRODUCTS)
    args = parser.parse_args(argv)
    catalog = generate_catalog(args.seed, args.num_products)
    directory = catalog.save(args.out)
    print(f"wrote {len(catalog.products)} products and {len(catalog.goals)} goals to {directory}")


if __name__ == "__main__":
    main()
