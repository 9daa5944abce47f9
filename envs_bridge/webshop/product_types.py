"""The product types the generated WebShop catalog is drawn from (vocabularies only, no logic).

Each type plays the part of one Amazon search query family of the original WebShop scrape
(docs/environments.md §5.1): a top-level ``category`` (the original has beauty, electronics, fashion,
food and furniture), a ``product_category`` breadcrumb "A › B › C", the scrape ``queries``, the words
product names are made of, the attribute vocabulary goals are written in, the option groups (colour,
size, flavour, pack, ...) and a price band. All strings are lower-case where WebShop lower-cases them
(attributes, option names and values, queries) and title-case in names, as on Amazon.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ProductType:
    key: str  # stable identifier, also the goal's product type
    category: str  # WebShop's top-level category
    product_category: str  # breadcrumb joined by " › "
    queries: tuple[str, ...]  # scrape queries; a product gets one of them as its ``query``
    type_nouns: tuple[str, ...]  # head nouns of the name ("Accent Chair"); also the instruction's type phrase
    brands: tuple[str, ...]
    styles: tuple[str, ...]  # name modifiers placed before the head noun
    attributes: tuple[str, ...]  # the attribute vocabulary (lower-case, as in items_ins_v2)
    option_groups: tuple[tuple[str, tuple[str, ...]], ...]  # (option name, all values) per group
    price_range: tuple[float, float]  # dollars
    uses: tuple[str, ...]  # "for ..." tails of names and descriptions


# Colour values shared by several types; compound names exercise WebShop's colour normalisation
# ("navy blue" -> "blue", "dark grey" -> "dark", "jet black" -> "black").
_CLOTHING_COLORS = (
    "black", "white", "navy blue", "heather grey", "red", "olive green", "burgundy", "royal blue",
    "light pink", "charcoal", "khaki", "jet black",
)
_FURNITURE_COLORS = ("grey", "beige", "navy", "dark grey", "cream", "emerald green", "mustard yellow", "brown")
_DEVICE_COLORS = ("black", "white", "silver", "space gray", "rose gold", "midnight blue", "mint green")
_APPAREL_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")


PRODUCT_TYPES: tuple[ProductType, ...] = (
    ProductType(
        key="shampoo",
        category="beauty",
        product_category="Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
        queries=("shampoo", "sulfate free shampoo"),
        type_nouns=("Shampoo", "Shampoo and Conditioner Set", "Clarifying Shampoo"),
        brands=("Herbora", "Luxe Locks", "Pure Roots", "Maple Grove", "Oceana", "Verdant"),
        styles=("Moisturizing", "Volumizing", "Nourishing", "Daily", "Repairing"),
        attributes=(
            "sulfate free", "paraben free", "natural ingredients", "dry hair", "hair growth",
            "damaged hair", "cruelty free", "color treated", "long lasting", "tea tree",
        ),
        option_groups=(
            ("size", (
                "8 fl oz (pack of 1)", "12 fl oz (pack of 1)", "16.9 fl oz (pack of 1)", "32 fl oz (pack of 1)",
                "8 fl oz (pack of 2)",
            )),
            ("scent", ("lavender", "coconut", "tea tree mint", "unscented", "citrus", "eucalyptus")),
        ),
        price_range=(6.0, 45.0),
        uses=("Men and Women", "All Hair Types", "Curly Hair", "Daily Use"),
    ),
    ProductType(
        key="face_moisturizer",
        category="beauty",
        product_category="Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
        queries=("face moisturizer", "face cream for women"),
        type_nouns=("Face Moisturizer", "Night Cream", "Day Cream", "Gel Cream"),
        brands=("Dermelle", "Clearwave", "Bloom Botanics", "Soleil", "Aquaris", "Radiant Co"),
        styles=("Hydrating", "Oil Free", "Lightweight", "Firming", "Brightening"),
        attributes=(
            "hyaluronic acid", "fragrance free", "sensitive skin", "anti aging", "cruelty free",
            "non comedogenic", "dry skin", "vitamin c", "fine lines", "dermatologist tested",
        ),
        option_groups=(
            ("size", ("1.7 ounce", "2.5 ounce", "3.4 ounce", "1.7 ounce (pack of 2)")),
        ),
        price_range=(9.0, 80.0),
        uses=("Women and Men", "All Skin Types", "Oily Skin", "Day and Night"),
    ),
    ProductType(
        key="running_shoes",
        category="fashion",
        product_category="Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        queries=("running shoes", "mens sneakers"),
        type_nouns=("Running Shoes", "Sneakers", "Trail Running Shoes", "Walking Shoes"),
        brands=("Stridex", "Fleetfoot", "Apex Motion", "Northpeak", "Velo", "Kinetica"),
        styles=("Lightweight", "Breathable", "Cushioned", "Athletic", "Casual"),
        attributes=(
            "non slip", "rubber sole", "lace up", "memory foam", "arch support", "breathable mesh",
            "wide toe box", "machine washable", "shock absorption", "slip resistant",
        ),
        option_groups=(
            ("color", _CLOTHING_COLORS[:8]),
            ("size", _SHOE_SIZES),
        ),
        price_range=(25.0, 160.0),
        uses=("Men", "Gym and Jogging", "Road Running", "Everyday Walking"),
    ),
    ProductType(
        key="t_shirt",
        category="fashion",
        product_category="Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › T-Shirts",
        queries=("womens t shirt", "graphic tee"),
        type_nouns=("T-Shirt", "Tee", "Tunic Top", "Crewneck Shirt"),
        brands=("Cottonway", "Urban Loom", "Bellweather", "Saltwater", "Threadline", "Juniper"),
        styles=("Casual", "Oversized", "Vintage", "Basic", "Loose Fit"),
        attributes=(
            "short sleeve", "long sleeve", "machine wash", "classic fit", "relaxed fit", "cotton spandex",
            "soft material", "v neck", "crew neck", "tumble dry",
        ),
        option_groups=(
            ("color", _CLOTHING_COLORS),
            ("size", _APPAREL_SIZES),
        ),
        price_range=(8.0, 40.0),
        uses=("Women", "Summer", "Workout", "Everyday Wear"),
    ),
    ProductType(
        key="almonds",
        category="food",
        product_category="Grocery & Gourmet Food › Snack Foods › Nuts & Seeds › Almonds",
        queries=("almonds", "roasted nuts snack"),
        type_nouns=("Almonds", "Mixed Nuts", "Almond Snack Packs", "Trail Mix"),
        brands=("Sunny Orchard", "Nutworks", "Golden Grove", "Harvest Lane", "Pacific Farms", "Crunchwell"),
        styles=("Roasted", "Salted", "Whole", "Natural", "Smoked"),
        attributes=(
            "gluten free", "non gmo", "low sodium", "keto friendly", "high protein", "resealable bag",
            "dry roasted", "kosher certified", "plant based", "individually wrapped",
        ),
        option_groups=(
            ("flavor name", ("sea salt", "honey roasted", "smokehouse", "cocoa dusted", "unsalted", "chili lime")),
            ("size", ("6 ounce (pack of 1)", "16 ounce (pack of 1)", "1.5 ounce (pack of 12)", "40 ounce (pack of 1)")),
        ),
        price_range=(4.0, 35.0),
        uses=("Snacking", "Lunch Boxes", "Office", "Baking"),
    ),
    ProductType(
        key="coffee",
        category="food",
        product_category="Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
        queries=("ground coffee", "whole bean coffee"),
        type_nouns=("Ground Coffee", "Whole Bean Coffee", "Coffee Pods", "Cold Brew Coffee"),
        brands=("Morning Ridge", "Black Harbor", "Altura", "Copper Kettle", "Bean Theory", "Highland"),
        styles=("Medium Roast", "Dark Roast", "Light Roast", "Single Origin", "Organic"),
        attributes=(
            "fair trade", "usda organic", "single serve", "decaffeinated", "medium roast", "dark roast",
            "arabica beans", "low acid", "kosher certified", "small batch",
        ),
        option_groups=(
            ("flavor name", ("french vanilla", "hazelnut", "original", "caramel", "mocha", "colombian")),
            ("size", ("12 ounce (pack of 1)", "2 pound (pack of 1)", "12 ounce (pack of 3)", "32 count")),
        ),
        price_range=(7.0, 55.0),
        uses=("Drip Coffee Makers", "French Press", "Espresso", "Home Brewing"),
    ),
    ProductType(
        key="wireless_keyboard",
        category="electronics",
        product_category="Electronics › Computers & Accessories › Computer Accessories & Peripherals › Keyboards",
        queries=("wireless keyboard", "mechanical keyboard"),
        type_nouns=("Keyboard", "Mechanical Keyboard", "Keyboard and Mouse Combo", "Gaming Keyboard"),
        brands=("Keyforge", "Typeline", "Logix", "Arcwave", "Nimbus", "Corvid"),
        styles=("Wireless", "Compact", "Ergonomic", "Slim", "Backlit"),
        attributes=(
            "bluetooth", "rechargeable battery", "usb c", "backlit keys", "mechanical switches",
            "quiet typing", "plug and play", "multi device", "long battery life", "water resistant",
        ),
        option_groups=(
            ("color", _DEVICE_COLORS[:5]),
            ("style", ("full size", "tenkeyless", "60 percent", "with numeric keypad")),
        ),
        price_range=(18.0, 180.0),
        uses=("Windows and Mac", "Laptop", "Office", "Gaming"),
    ),
    ProductType(
        key="headphones",
        category="electronics",
        product_category="Electronics › Headphones, Earbuds & Accessories › Headphones › Over-Ear Headphones",
        queries=("bluetooth headphones", "noise cancelling headphones"),
        type_nouns=("Headphones", "Over Ear Headphones", "Earbuds", "Headset"),
        brands=("Sonara", "Bassline", "Auralis", "Echo Peak", "Quietly", "Tempo"),
        styles=("Wireless", "Foldable", "Studio", "Sport", "Premium"),
        attributes=(
            "noise cancelling", "long battery life", "built in microphone", "hands free", "fast charging",
            "hi fi stereo", "memory foam", "bluetooth", "carrying case", "low latency",
        ),
        option_groups=(
            ("color", _DEVICE_COLORS),
        ),
        price_range=(15.0, 300.0),
        uses=("Travel", "Work from Home", "Phone Calls", "Music"),
    ),
    ProductType(
        key="accent_chair",
        category="furniture",
        product_category="Home & Kitchen › Furniture › Living Room Furniture › Chairs › Accent Chairs",
        queries=("accent chairs", "living room chair"),
        type_nouns=("Accent Chair", "Armchair", "Club Chair", "Swivel Chair"),
        brands=("Maple", "Homelux", "Rivet Home", "Oakfield", "Nordhaven", "Linden & Co"),
        styles=("Mid Century Modern", "Upholstered", "Tufted", "Velvet", "Wingback"),
        attributes=(
            "pu leather", "high density foam", "solid wood legs", "easy assemble", "living room",
            "lumbar support", "metal legs", "velvet fabric", "button tufted", "wood frame",
        ),
        option_groups=(
            ("color", _FURNITURE_COLORS),
        ),
        price_range=(70.0, 420.0),
        uses=("Living Room", "Bedroom", "Reading Nook", "Office"),
    ),
    ProductType(
        key="office_desk",
        category="furniture",
        product_category="Home & Kitchen › Furniture › Home Office Furniture › Home Office Desks",
        queries=("computer desk", "standing desk"),
        type_nouns=("Computer Desk", "Writing Desk", "Standing Desk", "L Shaped Desk"),
        brands=("Deskcraft", "Workwell", "Oakfield", "Linden & Co", "Hatch", "Steelgrove"),
        styles=("Modern", "Industrial", "Height Adjustable", "Compact", "Rustic"),
        attributes=(
            "easy assemble", "storage shelves", "metal frame", "engineered wood", "height adjustable",
            "cable management", "keyboard tray", "space saving", "water resistant", "heavy duty",
        ),
        option_groups=(
            ("color", ("espresso brown", "black", "white", "walnut", "oak", "grey")),
            ("size", ("40 inch", "47 inch", "55 inch", "63 inch")),
        ),
        price_range=(45.0, 520.0),
        uses=("Home Office", "Small Spaces", "Study", "Gaming"),
    ),
    ProductType(
        key="dog_bed",
        category="pet supplies",
        product_category="Pet Supplies › Dogs › Beds & Furniture › Beds",
        queries=("dog bed", "orthopedic dog bed"),
        type_nouns=("Dog Bed", "Pet Bed", "Bolster Dog Bed", "Dog Crate Pad"),
        brands=("Pawsome", "Snoozer", "Barkley", "Furhaven Co", "Cozy Tails", "Kennelworks"),
        styles=("Orthopedic", "Calming", "Washable", "Plush", "Waterproof"),
        attributes=(
            "machine washable", "non slip bottom", "memory foam", "removable cover", "waterproof liner",
            "joint relief", "easy clean", "chew resistant", "orthopedic foam", "raised rim",
        ),
        option_groups=(
            ("size", ("small", "medium", "large", "x-large", "jumbo")),
            ("color", ("grey", "brown", "navy blue", "charcoal", "beige", "sage green")),
        ),
        price_range=(18.0, 150.0),
        uses=("Small Dogs", "Large Dogs", "Cats", "Senior Dogs"),
    ),
    ProductType(
        key="throw_blanket",
        category="home",
        product_category="Home & Kitchen › Bedding › Blankets & Throws › Throws",
        queries=("throw blanket", "fleece blanket"),
        type_nouns=("Throw Blanket", "Fleece Blanket", "Sherpa Throw", "Knit Blanket"),
        brands=("Hearthside", "Softloom", "Cozy Cabin", "Nordhaven", "Bedford", "Willow Lane"),
        styles=("Soft", "Lightweight", "Chunky", "Plush", "Reversible"),
        attributes=(
            "machine washable", "fade resistant", "super soft", "all season", "microfiber",
            "living room", "double sided", "fluffy warm", "easy care", "wrinkle resistant",
        ),
        option_groups=(
            ("color", ("grey", "cream", "navy", "blush pink", "dark green", "caramel", "black")),
            ("size", ("50x60 inch", "60x80 inch", "twin", "queen", "king")),
        ),
        price_range=(12.0, 90.0),
        uses=("Couch", "Bed", "Sofa", "Travel"),
    ),
)

PRODUCT_TYPES_BY_KEY = {product_type.key: product_type for product_type in PRODUCT_TYPES}
