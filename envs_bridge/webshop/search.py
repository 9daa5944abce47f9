"""BM25 product search, standing in for WebShop's pyserini/Lucene index (docs/environments.md §5.3).

WebShop indexes one document per product (title, description, first bullet point and the option
text, lower-cased) and returns the top 50 hits of a query. This module does the same with
``rank_bm25`` (a stand-in measured to give the original environment's oracle reward):
BM25 with Lucene's default parameters (k1 = 0.9, b = 0.4), a tokenizer close to Lucene's English
analyzer (alphanumeric tokens, Lucene's English stop words, plural stripping) and only documents that
share a term with the query counted as hits, as in Lucene. Ties are broken by catalog order, so a
query always gives the same ranking.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from envs_bridge.webshop.catalog import Product

SEARCH_RETURN_N = 50  # WebShop's hits per search
_TOKEN = re.compile(r"[a-z0-9]+")
# Lucene's English stop-word set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
_STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
    "was", "will", "with",
))


def _strip_plural(token: str) -> str:
    """Lucene's minimal English stemmer: 'ies' -> 'y', drop a plural 'es'/'s' (not 'ss', 'us')."""
    if len(token) < 3 or token.endswith(("ss", "us")):
        return token
    if token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if token.endswith("es") and not token.endswith(("aes", "ees", "oes")):
        return token[:-1]
    if token.endswith("s"):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    return [_strip_plural(token) for token in _TOKEN.findall(text.lower()) if token not in _STOP_WORDS]


def product_document(product: Product) -> str:
    """The text WebShop indexes for a product."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options)
    first_bullet = product.small_description[0] if product.small_description else ""
    return f"{product.name} {product.full_description} {first_bullet} {option_text}".lower()


class ProductSearch:
    """Ranks catalog products for a keyword query; results are cached per query string."""

    def __init__(self, products: Sequence[Product], top_n: int = SEARCH_RETURN_N) -> None:
        if not products:
            raise ValueError("cannot build a search index over an empty catalog")
        self._asins = [product.asin for product in products]
        self._bm25 = BM25Okapi([tokenize(product_document(product)) for product in products], k1=0.9, b=0.4)
        self._top_n = top_n
        self.search = functools.lru_cache(maxsize=4096)(self._search)

    def _search(self, query: str) -> tuple[str, ...]:
        """ASINs of the top hits, best first; only products sharing a term with the query."""
        terms = tokenize(query)
        if not terms:
            return ()
        documents = self._bm25.doc_freqs  # per document {term: count}
        matched = np.fromiter((any(term in counts for term in terms) for counts in documents), bool, len(documents))
        scores = self._bm25.get_scores(terms)
        order = np.argsort(-scores, kind="stable")  # stable: equal scores keep catalog order
        return tuple(self._asins[index] for index in order if matched[index])[: self._top_n]
