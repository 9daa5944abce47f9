"""The built-in WebShop text environment (docs/environments.md §5; issue 5, adapter 3).

product_types.py  vocabularies of the generated catalog (categories, attributes, option groups, prices)
catalog.py        seeded products in WebShop's schema + synthetic goals; JSON in WebShop's file layout
search.py         BM25 product search (rank_bm25), standing in for WebShop's Lucene index
nouns.py          noun extraction for the reward's type factor (lexicon default, spaCy optional)
reward.py         WebShop's purchase reward, rule for rule
engine.py         the page state machine and its [SEP]-joined text observations
oracle.py         the gold action sequence of a goal
adapter.py        WebShopAdapter: the EnvAdapter the env servers host (spec "webshop", envs_bridge/specs.py)
bench.py          in-process random play: steps/s and states shared within groups
"""
