"""One ``EnvSpec`` per environment: everything the rest of the code needs to know about it.

A spec names its adapter and prompt builder by import path (``"module:attribute"``), resolved only
when asked for, so reading a spec (the config checks names, option names, splits and the credit
recipe) imports no engine and no JAX. Adding an environment is one spec in ``SPECS`` plus its adapter
module (docs/environments.md §9). Specs defined outside this repository (and the tests' tiny
environment) come in through ``$MILEGPO_ENV_SPECS``: a comma-separated list of modules, each defining
``ENV_SPEC``; env servers inherit the variable from the pool, so they see the same environments.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any

# Modules (comma-separated) that each define ENV_SPEC: environments beyond the built-in ones.
SPEC_MODULES_VAR = "MILEGPO_ENV_SPECS"


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    name: str
    adapter: str  # "module:Class" of the envs_bridge.base.EnvAdapter subclass
    install_hint: str  # shown when the adapter's module cannot be imported
    # keyword arguments of the adapter besides max_steps (the config checks env.options against them
    # without importing the adapter; tests/envs/test_registry.py keeps them equal to the signature)
    adapter_options: tuple[str, ...]
    prompt_builder: str  # "module:function" building one step's prompt (milegpo_jax.rollout.prompts)
    action_tail_chars: int  # a response without <action> tags sends its last this-many characters
    reward_scale: float = 1.0  # env reward x this before credit (TWX's 0/1 on ALFWorld's 0/10 scale)
    credit_recipe: str = "alfworld"  # the credit recipe when credit.recipe is not set
    eval_splits: tuple[str, ...] = ("eval_id", "eval_ood")
    # the adapter flags BEACON's milestone steps in step info ("milestone_achieved"), which the
    # collector records; estimators that need the flags refuse an env without them
    milestone_flags: bool = False

    def adapter_class(self) -> Any:
        return load_object(self.adapter)

    def prompt_function(self) -> Any:
        return load_object(self.prompt_builder)


SPECS: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in (
        EnvSpec(
            name="textworld_express",
            adapter="envs_bridge.textworld_express.adapter:TextWorldExpressAdapter",
            install_hint="pip install textworld-express==1.1.0 (and Java >= 11 on PATH)",
            adapter_options=("game", "game_params", "shaped_reward", "gold_path", "state_key_mode"),
            prompt_builder="milegpo_jax.rollout.prompts:textworld_express_prompt",
            action_tail_chars=30,
            reward_scale=10.0,  # 1 on success, like ALFWorld's 10 after scaling (docs/environments.md §6.3)
            credit_recipe="alfworld",  # sparse success reward, as in ALFWorld
        ),
        EnvSpec(
            name="webshop",
            adapter="envs_bridge.webshop.adapter:WebShopAdapter",
            install_hint="pip install rank-bm25 thefuzz",
            adapter_options=(
                "catalog_seed", "num_products", "catalog_dir", "ood_product_types", "noun_tagger",
                "spacy_model", "search_without_search_bar",
            ),
            prompt_builder="milegpo_jax.rollout.prompts:webshop_prompt",
            action_tail_chars=20,
            credit_recipe="webshop",
            milestone_flags=True,  # the 4-phase detector (envs_bridge/webshop/milestones.py)
        ),
        EnvSpec(
            name="alfworld",
            adapter="envs_bridge.alfworld.adapter:AlfWorldAdapter",
            install_hint=(
                "bash envs_bridge/alfworld/bootstrap.sh, then serve it with .venv-alfworld/bin/python "
                "(MILEGPO_PYTHON_ALFWORLD)"
            ),
            adapter_options=("games_dir", "expert"),
            prompt_builder="milegpo_jax.rollout.prompts:alfworld_prompt",
            action_tail_chars=30,
            credit_recipe="alfworld",
            milestone_flags=True,  # the expert plan's actions, in order (envs_bridge/alfworld/milestones.py)
        ),
    )
}


class UnknownEnvError(KeyError):
    """No spec of that name (built in or from $MILEGPO_ENV_SPECS)."""

    def __str__(self) -> str:
        return str(self.args[0])


def load_object(path: str) -> Any:
    """``"package.module:attribute"`` -> the attribute (imports the module; ImportError propagates)."""
    module, sep, attribute = path.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"import path {path!r}: expected 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)


def _extra_specs() -> dict[str, EnvSpec]:
    extra = {}
    for module in filter(None, (m.strip() for m in os.environ.get(SPEC_MODULES_VAR, "").split(","))):
        spec = getattr(importlib.import_module(module), "ENV_SPEC", None)
        if not isinstance(spec, EnvSpec):
            raise TypeError(f"${SPEC_MODULES_VAR}: module {module} defines no ENV_SPEC (an envs_bridge.specs.EnvSpec)")
        extra[spec.name] = spec
    return extra


def all_specs() -> dict[str, EnvSpec]:
    return {**SPECS, **_extra_specs()}


def env_names() -> tuple[str, ...]:
    return tuple(all_specs())


def env_spec(name: str) -> EnvSpec:
    specs = all_specs()
    if name not in specs:
        raise UnknownEnvError(f"unknown environment {name!r}: registered are {', '.join(specs)}")
    return specs[name]
