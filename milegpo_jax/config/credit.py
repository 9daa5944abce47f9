"""The ``credit`` section: the estimator, its recipe and stage, and any ``CreditConfig`` option.

``config.credit.eta = 0.5`` (or ``--config.credit.eta=0.5``) sets one option of the estimator; every
option left at None takes the recipe's value (``milegpo_jax.credit.config.make_credit_config``). The
section's fields are generated from ``CreditConfig``, so a new credit option is a config key at once.
``parse_credit_options`` reads the credit CLIs' ``--set key=value`` with the config's text parser.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

from milegpo_jax.config.checks import ConfigError, choice, suggestion
from milegpo_jax.config.text import parse_text, split_assignment
from milegpo_jax.credit.config import (
    DEFAULT_RECIPE,
    ESTIMATORS,
    RECIPES,
    STAGED,
    STAGES,
    CreditConfig,
    CreditConfigError,
    make_credit_config,
)

# CreditConfig's fields besides the two the section names itself, with their types
OPTION_TYPES: dict[str, Any] = {
    f.name: typing.get_type_hints(CreditConfig)[f.name]
    for f in dataclasses.fields(CreditConfig)
    if f.name not in ("estimator", "stage")
}


class CreditOptionError(ConfigError, CreditConfigError):
    """A bad ``--set key=value`` of a credit CLI (caught as either error type)."""


def _check(self) -> None:
    choice("credit.estimator", self.estimator, ESTIMATORS)
    if self.recipe is not None:
        choice("credit.recipe", self.recipe, RECIPES)
    if self.stage is not None:
        choice("credit.stage", self.stage, STAGES)
        if self.estimator not in STAGED:
            raise ConfigError(
                f"credit.stage={self.stage!r} applies to {', '.join(STAGED)} only; "
                f"set credit.stage=None for {self.estimator}"
            )
    self.build()


def _options(self) -> dict[str, Any]:
    """The options set (not None): what differs from the recipe."""
    return {name: getattr(self, name) for name in OPTION_TYPES if getattr(self, name) is not None}


def _build(self, default_recipe: str = DEFAULT_RECIPE) -> CreditConfig:
    """The estimator's ``CreditConfig``: recipe defaults, the stage, then the options set here."""
    try:
        return make_credit_config(self.estimator, self.recipe or default_recipe, self.stage, self.options())
    except CreditConfigError as error:
        raise ConfigError(f"credit: {error}") from None


CreditSection = dataclasses.make_dataclass(
    "CreditSection",
    [
        ("estimator", str, dataclasses.field(default="milegpo")),
        # None: the environment's recipe (its spec's credit_recipe)
        ("recipe", typing.Optional[str], dataclasses.field(default=None)),
        # the estimators with stages (MileGPO: full (None), rcs (w/o PCC), md (w/o PCC and RCS))
        ("stage", typing.Optional[str], dataclasses.field(default=None)),
    ]
    + [(name, typing.Optional[hint], dataclasses.field(default=None)) for name, hint in OPTION_TYPES.items()],
    frozen=True,
    namespace={"__post_init__": _check, "options": _options, "build": _build,
               "__doc__": "Advantage estimator: estimator, recipe, stage, then CreditConfig's options (None: the recipe's)."},
)
CreditSection.__module__ = __name__


def parse_credit_options(assignments: Sequence[str], flag: str = "--set") -> dict[str, Any]:
    """``["eta=0.5", "include_start_state=false"]`` -> ``{"eta": 0.5, "include_start_state": False}``,
    parsed as ``CreditConfig``'s field types by the config's text parser."""
    options = {}
    for assignment in assignments:
        try:
            key, text = split_assignment(assignment)
        except ConfigError:
            raise CreditOptionError(f"{flag} {assignment!r}: expected key=value") from None
        if key not in OPTION_TYPES:
            where = "; it has its own flag" if key in ("estimator", "stage") else suggestion(key, OPTION_TYPES)
            raise CreditOptionError(f"unknown credit option {key!r}{where}")
        try:
            options[key] = parse_text(OPTION_TYPES[key], text, key)
        except ConfigError as error:
            raise CreditOptionError(str(error)) from None
    return options


def credit_identity(section: Any, default_recipe: str) -> dict[str, Any]:
    """What ``config_hash`` covers of the section, in the shape hashes had before the options were
    the section's own fields (``{estimator, recipe, stage, overrides}``), so earlier runs resume."""
    return {
        "estimator": section.estimator,
        "recipe": section.recipe or default_recipe,
        "stage": section.stage,
        "overrides": dict(section.options()),
    }


__all__ = ["OPTION_TYPES", "CreditOptionError", "CreditSection", "credit_identity", "parse_credit_options"]
