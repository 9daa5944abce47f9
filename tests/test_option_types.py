"""The config's sections take their fields from the library's option types (docs/training.md §1):
the flat names, defaults and hashes of every shipped config are those of before, and the library
below the trainer takes option objects, never the config (docs/architecture.md §3)."""

import hashlib
import json
from pathlib import Path

import pytest

from milegpo_jax.config import apply_overrides, config_hash, load_config, load_config_file, to_dict
from tests.test_docs import project_imports

REPO = Path(__file__).resolve().parents[1]

# (config_hash, a digest of the whole to_dict: every flat name, default and value, the hash-excluded
# ones too), computed on main before the sections were derived from the option types; smollm2_coin11.py's
# again after its warm start went to batches of 4 rows and its evaluation to 32 + 16 tasks after the last
# iteration only (docs/results/llm-credit.md, "Amendment" and "Amendment 2"); every whole digest again
# after sft.skip_repeated_prompts was added (a new flat name at its default: the config hashes stayed);
# smollm2_twc2.py added later (the study's recipe since "Amendment 3")
SHIPPED = """
alfworld.py 005b2ab242c0c614 019bc83899f256cb
base.py a679d59481edae61 d4aacbe6db47f479
demo.py 209640ceb45ba4f7 5b3a2760e4e0cb57
webshop.py 1c842d95882e1038 f5139b2ec4564860
smollm2_coin11.py 02c1c2c56e752de0 446c9042eb80aeb5
smollm2_twc2.py d13831ea6bea6e66 8558bab6afd914e7
smollm2_twx.py ad693b66614d8b86 b3ce8261eb64ec2e
twx.py:twc eddf22dfa89fbcc5 eb573d3be1844535
twx.py:cookingworld 5a036c837d84b2d0 6da9b2940ac688eb
twx.py:coin 86ba92966418606a f4f8ee9b4374e05f
twx.py:mapreader 4948dc2934ffa490 ec09af661c684ac6
"""
SHIPPED_HASHES = {spec: (pinned, whole) for spec, pinned, whole in map(str.split, SHIPPED.split("\n")[1:-1])}
DEFAULTS = ("3592a0bbe3ca8dd0", "2473e024ec0e2384")  # load_config({})
# experiments/sweeps/ablation.py's variants on alfworld.py (seed 0)
ABLATION = """
milegpo-seed0 3512f513b3f75a6b
milegpo-no-pcc-seed0 0786318feead23bf
milegpo-no-pcc-rcs-seed0 fcb92bc58aba7318
graphgpo-seed0 8d53ee2f5010bc89
gigpo-seed0 45a43caf31facaa2
grpo-seed0 9f24e5b9f3ddf564
"""


def hashes(config) -> tuple[str, str]:
    return config_hash(config), hashlib.sha256(json.dumps(to_dict(config), sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("spec", sorted(SHIPPED_HASHES))
def test_shipped_configs_hash_as_before(spec):
    assert hashes(load_config(load_config_file(f"{REPO / 'experiments' / 'configs'}/{spec}"))) == SHIPPED_HASHES[spec]


def test_defaults_and_sweep_variants_hash_as_before():
    from experiments.sweeps.ablation import get_sweep

    assert hashes(load_config({})) == DEFAULTS
    raw = load_config_file(REPO / "experiments/configs/alfworld.py")
    assert {point["run.name"]: config_hash(load_config(apply_overrides(raw, point))) for point in get_sweep((0,))} == dict(
        map(str.split, ABLATION.split("\n")[1:-1]))


def test_option_objects_are_the_sections_values():
    config = load_config(load_config_file(REPO / "experiments/configs/smollm2_twx.py"))
    sampling = config.sampling_config()
    assert (sampling.max_new_tokens, sampling.prefix_sharing, sampling.max_cache_len) == (32, True, 480 + 32)
    assert config.ppo_loss_config().kl_coef == config.ppo.kl_coef
    assert config.optimizer_config().learning_rate == config.optim.learning_rate
    assert config.runtime_options().logits_chunk == config.ppo.logits_chunk


def test_nothing_below_the_trainer_imports_the_config():
    """Only the trainer (and the config itself) reads the config; the library takes option objects."""
    bad = [
        f"{module} imports {name}"
        for module, names in project_imports("milegpo_jax").items()
        if not module.startswith("milegpo_jax/config/") and module != "milegpo_jax/train/trainer.py"
        for name in sorted(names)
        if name == "milegpo_jax.config" or name.startswith("milegpo_jax.config.")
    ]
    # the entry point of `python -m milegpo_jax.credit` hands the config's --set parser to the credit CLI
    bad.remove("milegpo_jax/credit/__main__.py imports milegpo_jax.config")
    assert not bad, "\n".join(bad)
