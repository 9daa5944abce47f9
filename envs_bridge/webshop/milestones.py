"""BEACON's WebShop milestones (docs/credit-family.md): a four-phase detector, reset with the goal.

Phases, completed in order, at most one per step, nothing after the last:

1. ``search``: a search whose first result page lists a product that meets the goal (every goal
   attribute, every goal option value on offer, price within the bound);
2. ``detail``: a click from the results onto a product that meets the goal;
3. ``options``: every goal option value selected (goals without options skip this phase);
4. ``purchase``: a purchase the env's reward scores with r_att = r_price = r_option = 1.

The product test uses the reward's own attribute and option matchers, so "meets the goal" means
what the purchase reward would count as a match.
"""

from __future__ import annotations

from envs_bridge.webshop.catalog import Catalog, Goal, Product
from envs_bridge.webshop.engine import PRODUCTS_PER_PAGE, Page, WebShopSession, parse_action
from envs_bridge.webshop.reward import RewardBreakdown, count_attribute_matches, count_option_matches

PHASES = ("search", "detail", "options", "purchase")
COMPLETE = "complete"


def meets_goal(product: Product, goal: Goal) -> bool:
    offered = [value for _, values in product.options for value in values]
    return (
        count_attribute_matches(product, goal.attributes) == len(goal.attributes)
        and count_option_matches(offered, goal.goal_options) == len(goal.goal_options)
        and product.price <= goal.price_upper
    )


class PhaseDetector:
    """Reset per episode with the goal; ``observe`` after every step says whether it completed the
    pending phase."""

    def __init__(self, catalog: Catalog, goal: Goal):
        self.catalog, self.goal = catalog, goal
        self.phases = [phase for phase in PHASES if phase != "options" or goal.goal_options]
        self.done = 0

    @property
    def pending(self) -> str:
        return self.phases[self.done] if self.done < len(self.phases) else COMPLETE

    def observe(self, action: str, page_before: Page, session: WebShopSession, purchase: RewardBreakdown | None) -> bool:
        phase = self.pending
        name, _ = parse_action(action.strip().lower())
        if phase == "search":
            hit = (
                name == "search"
                and session.page is Page.RESULTS
                and session.page_number == 1
                and any(meets_goal(self.catalog.product(asin), self.goal) for asin in session.results[:PRODUCTS_PER_PAGE])
            )
        elif phase == "detail":
            hit = (
                name == "click"
                and page_before is Page.RESULTS
                and session.page is Page.ITEM
                and meets_goal(session.product, self.goal)
            )
        elif phase == "options":
            selected = list(session.options.values()) if session.asin is not None else []
            hit = name == "click" and count_option_matches(selected, self.goal.goal_options) == len(self.goal.goal_options)
        elif phase == "purchase":
            hit = (
                purchase is not None
                and purchase.r_att == 1.0
                and bool(purchase.r_price)
                and purchase.r_option in (None, 1.0)
            )
        else:
            hit = False
        self.done += hit
        return hit
