"""WebShop's page state machine in text mode (docs/environments.md §5.2).

One ``WebShopSession`` is one shopper working on one goal. Pages and their visible text follow the
original Flask templates as the text environment renders them (visible strings joined by " [SEP] "):

* search:   ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search``
* results:  ``Instruction: [SEP] <instruction> [SEP] Back to Search [SEP] Page 2 (Total results: 50)
  [SEP] < Prev [SEP] Next > [SEP] <ASIN> [SEP] <name> [SEP] <price> ...`` (10 products a page; "< Prev"
  from page 2 on; "Next >" always, as in the original, even past the last hit)
* item:     ``... [SEP] Back to Search [SEP] < Prev [SEP] <option name> [SEP] <value> ... [SEP] <name>
  [SEP] Price: <price> [SEP] Rating: <rating> [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now``
* sub-page: ``... [SEP] Back to Search [SEP] < Prev [SEP] <description | bullet points | reviews>``
* done:     thank-you page with the score; the episode ends.

Actions are ``search[keywords]`` and ``click[text]``; the whole action is matched case-insensitively.
The clickables of a page are its buttons and product links (lower-cased) and its option values, in
page order, exactly what WebShop's ``get_available_actions`` lists. As in WebShop, selecting an option
does not change the page text (text mode shows no "clicked" marker); going back to the results clears
the selected options; ``click[search]`` is listed but does nothing. An action that is malformed, not on
the page, or a search without a search bar leaves the session unchanged (a self-loop) and is reported
as invalid. (The original also runs ``search[...]`` from pages without a search bar;
``search_without_search_bar=True`` restores that.)
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Any

from envs_bridge.webshop.catalog import Catalog, Goal, Product
from envs_bridge.webshop.nouns import NounTagger, lexicon_nouns
from envs_bridge.webshop.reward import RewardBreakdown, webshop_reward
from envs_bridge.webshop.search import ProductSearch

SEP = " [SEP] "
PRODUCTS_PER_PAGE = 10
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SEARCH_BUTTON = "Search"
SUB_PAGES = ("Description", "Features", "Reviews")
# WebShop's action grammar: ``name[argument]``, greedy, anchored at the start only.
_ACTION = re.compile(r"(.+)\[(.+)\]")


class Page(enum.Enum):
    SEARCH = "search"
    RESULTS = "results"
    ITEM = "item"
    ITEM_SUB = "item_sub"
    DONE = "done"


class _Click(enum.Enum):
    SEARCH_BUTTON = "search_button"
    BACK_TO_SEARCH = "back_to_search"
    NEXT = "next"
    PREV = "prev"
    PRODUCT = "product"
    SUB_PAGE = "sub_page"
    BUY = "buy"
    OPTION = "option"


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    valid: bool  # False: the action was malformed or not available, and nothing changed
    done: bool  # a purchase ended the episode
    purchase: RewardBreakdown | None  # the reward of the purchase, on the step that bought


def parse_action(action: str) -> tuple[str, str | None]:
    """(name, argument) of ``name[argument]``; (action, None) when there are no brackets."""
    match = _ACTION.match(action)
    if match is None:
        return action, None
    return match.group(1), match.group(2)


def strip_instruction(observation: str, instruction: str) -> str:
    """verl-agent's WebShop observation formatting, the GiGPO/GraphGPO state key (docs/credit.md §1.5).

    The parts after the instruction, each quoted, joined by " [SEP] "; a page without the
    instruction (the done page) is returned unchanged.
    """
    parts = observation.split(SEP)
    try:
        index = parts.index(instruction)
    except ValueError:
        return observation
    return SEP.join(f"'{part}'" for part in parts[index + 1:])


class WebShopSession:
    def __init__(
        self,
        catalog: Catalog,
        search: ProductSearch,
        goal: Goal,
        nouns: NounTagger = lexicon_nouns,
        search_without_search_bar: bool = False,
    ) -> None:
        self.catalog = catalog
        self.goal = goal
        self._search = search
        self._nouns = nouns
        self._search_without_search_bar = search_without_search_bar
        self.page = Page.SEARCH
        self.keywords: str | None = None
        self.results: tuple[str, ...] = ()  # ASINs of the last search, best first
        self.page_number = 1
        self.asin: str | None = None  # the product whose item page (or sub-page) is open
        self.options: dict[str, str] = {}  # selected {option name: value} on the open item
        self.sub_page: str | None = None
        self.purchase: RewardBreakdown | None = None
        self.visited_asins: list[str] = []

    # --- what the shopper sees ---------------------------------------------------------------------

    @property
    def instruction(self) -> str:
        return self.goal.instruction_text

    @property
    def product(self) -> Product:
        if self.asin is None:
            raise RuntimeError(f"no product is open on the {self.page.value} page")
        return self.catalog.product(self.asin)

    def observation(self) -> str:
        return SEP.join(text for text in self._visible_texts() if text)

    def available_actions(self) -> dict[str, Any]:
        return {"has_search_bar": self.page is Page.SEARCH, "clickables": list(self._clickables())}

    def _visible_texts(self) -> list[str]:
        header = ["Instruction:", self.instruction]
        if self.page is Page.SEARCH:
            return ["WebShop", *header, SEARCH_BUTTON]
        if self.page is Page.RESULTS:
            texts = [*header, BACK_TO_SEARCH, f"Page {self.page_number} (Total results: {len(self.results)})"]
            if self.page_number > 1:
                texts.append(PREV_PAGE)
            texts.append(NEXT_PAGE)
            for product in self._page_products():
                texts += [product.asin, product.name, product.price_tag]
            return texts
        if self.page is Page.ITEM:
            product = self.product
            texts = [*header, BACK_TO_SEARCH, PREV_PAGE]
            for option_name, values in product.options:
                texts += [option_name, *values]
            texts += [product.name, f"Price: {product.price_tag}", f"Rating: {product.rating}"]
            return texts + [*SUB_PAGES, BUY_NOW]
        if self.page is Page.ITEM_SUB:
            return [*header, BACK_TO_SEARCH, PREV_PAGE, *self._sub_page_texts()]
        return self._done_texts()

    def _sub_page_texts(self) -> list[str]:
        product = self.product
        if self.sub_page == "Description":
            return [product.full_description.strip()]
        if self.sub_page == "Features":
            return [bullet.strip() for bullet in product.small_description]
        texts = []
        for review in product.reviews:
            texts += [f'"{review.title}"', str(review.score), review.body]
        return texts

    def _done_texts(self) -> list[str]:
        # The original page also prints hidden debugging fields, empty in the text environment.
        assert self.purchase is not None
        return [
            "Thank you for shopping with us!", "Your code:", "(Paste it in your MTurk interface.)",
            "Purchased", "asin", self.asin or "", "options", json.dumps(self.options),
            "Your score (min 0.0, max 1.0)", str(self.purchase.reward),
        ]

    def _page_products(self) -> list[Product]:
        start = (self.page_number - 1) * PRODUCTS_PER_PAGE
        return [self.catalog.product(asin) for asin in self.results[start:start + PRODUCTS_PER_PAGE]]

    def _clickables(self) -> dict[str, tuple[_Click, Any]]:
        """Clickable text -> what clicking it does, in WebShop's order (buttons, product links, options).

        A dict, like WebShop's: a later clickable with the same text replaces an earlier one.
        """
        clickables: dict[str, tuple[_Click, Any]] = {}
        if self.page is Page.SEARCH:
            clickables[SEARCH_BUTTON.lower()] = (_Click.SEARCH_BUTTON, None)
        elif self.page is Page.RESULTS:
            clickables[BACK_TO_SEARCH.lower()] = (_Click.BACK_TO_SEARCH, None)
            if self.page_number > 1:
                clickables[PREV_PAGE.lower()] = (_Click.PREV, None)
            clickables[NEXT_PAGE.lower()] = (_Click.NEXT, None)
            for product in self._page_products():
                clickables[product.asin.lower()] = (_Click.PRODUCT, product.asin)
        elif self.page is Page.ITEM:
            clickables[BACK_TO_SEARCH.lower()] = (_Click.BACK_TO_SEARCH, None)
            clickables[PREV_PAGE.lower()] = (_Click.PREV, None)
            for sub_page in SUB_PAGES:
                clickables[sub_page.lower()] = (_Click.SUB_PAGE, sub_page)
            clickables[BUY_NOW.lower()] = (_Click.BUY, None)
            for option_name, values in self.product.options:
                for value in values:
                    clickables[value] = (_Click.OPTION, option_name)
        elif self.page is Page.ITEM_SUB:
            clickables[BACK_TO_SEARCH.lower()] = (_Click.BACK_TO_SEARCH, None)
            clickables[PREV_PAGE.lower()] = (_Click.PREV, None)
        return clickables

    # --- what the shopper does ---------------------------------------------------------------------

    def step(self, action: str) -> StepOutcome:
        if self.page is Page.DONE:
            raise RuntimeError("the session has ended with a purchase")
        name, argument = parse_action(action.strip().lower())
        if name == "search" and argument:
            if self.page is not Page.SEARCH and not self._search_without_search_bar:
                return StepOutcome(valid=False, done=False, purchase=None)
            self._run_search(argument, page_number=1)
            return StepOutcome(valid=True, done=False, purchase=None)
        if name == "click" and argument is not None:
            clickable = self._clickables().get(argument)
            if clickable is not None and clickable[0] is not _Click.SEARCH_BUTTON:
                self._click(argument, *clickable)
                return StepOutcome(valid=True, done=self.page is Page.DONE, purchase=self.purchase)
        return StepOutcome(valid=False, done=False, purchase=None)

    def _run_search(self, keywords: str, page_number: int) -> None:
        self.keywords = keywords
        self.results = self._search.search(keywords)
        self.page_number = page_number
        self.page = Page.RESULTS
        self.asin, self.options, self.sub_page = None, {}, None  # WebShop resets these on every results render

    def _click(self, text: str, kind: _Click, payload: Any) -> None:
        if kind is _Click.BACK_TO_SEARCH:
            self.page, self.keywords, self.results = Page.SEARCH, None, ()
            self.asin, self.options, self.sub_page = None, {}, None
        elif kind is _Click.NEXT:
            self._run_search(self.keywords or "", self.page_number + 1)
        elif kind is _Click.PREV and self.page is Page.RESULTS:
            self._run_search(self.keywords or "", self.page_number - 1)
        elif kind is _Click.PREV and self.page is Page.ITEM:
            self._run_search(self.keywords or "", self.page_number)
        elif kind is _Click.PREV:  # from a sub-page back to its item page, options kept
            self.page, self.sub_page = Page.ITEM, None
        elif kind is _Click.SUB_PAGE:
            self.page, self.sub_page = Page.ITEM_SUB, payload
        elif kind is _Click.PRODUCT:
            self.page, self.asin = Page.ITEM, payload
            self.visited_asins.append(payload)
        elif kind is _Click.OPTION:
            self.options[payload] = text
        elif kind is _Click.BUY:
            product = self.product
            self.purchase = webshop_reward(product, self.goal, product.price, self.options, self._nouns)
            self.page = Page.DONE
