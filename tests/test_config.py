"""milegpo_jax.config: ConfigDict -> frozen TrainConfig, overrides, hashing."""

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_collections
import pytest

from milegpo_jax.config import (
    ConfigError,
    TrainConfig,
    apply_overrides,
    config_hash,
    config_identity,
    describe_changes,
    format_override,
    load_config,
    load_config_file,
    split_config_flags,
    to_dict,
    warm_start_inputs,
)

REPO = Path(__file__).resolve().parents[1]
ALFWORLD = REPO / "experiments" / "configs" / "alfworld.py"


@pytest.fixture(scope="module")
def alfworld_raw():
    return load_config_file(ALFWORLD)


def build(raw, *overrides):
    return load_config(apply_overrides(raw, list(overrides)))


def error_of(raw, *overrides) -> str:
    with pytest.raises(ConfigError) as caught:
        build(raw, *overrides)
    return str(caught.value)


# ------------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    "override, suggestion",
    [
        ("ppo.clip_lwo=0.3", "'ppo.clip_low'"),
        ("optim.learnig_rate=1e-5", "'optim.learning_rate'"),
        ("mesh.tensr=2", "'mesh.tensor'"),
        ("seed=2", "'run.seed'"),  # section forgotten: matched across sections
        ("learning_rate=1e-5", "'optim.learning_rate'"),
        ("credit.etta=0.5", "'credit.eta'"),  # CreditConfig's fields are the section's
        ("samplng.temperature=0.5", "'sampling'"),
    ],
)
def test_unknown_override_key_suggests_close_matches(alfworld_raw, override, suggestion):
    message = error_of(alfworld_raw, override)
    assert "unknown config key" in message and suggestion in message


def test_unknown_key_in_a_config_file_is_caught_with_suggestion(tmp_path):
    # ConfigDict itself accepts the typo; load_config must not
    path = tmp_path / "typo.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import importlib.util
            spec = importlib.util.spec_from_file_location("base", {str(REPO / "experiments/configs/base.py")!r})
            base = importlib.util.module_from_spec(spec); spec.loader.exec_module(base)

            def get_config():
                config = base.get_config()
                config.ppo.entropy_coeff = 0.01
                return config
            """
        )
    )
    with pytest.raises(ConfigError, match=r"unknown config key 'ppo.entropy_coeff'; did you mean 'ppo.entropy_coef'\?"):
        load_config(load_config_file(path))


def test_unknown_adapter_option_suggests_the_adapters_options():
    raw = load_config_file(REPO / "experiments/configs/twx.py")
    message = error_of(raw, "env.options.gmae=coin")
    assert "env.options.gmae" in message and "'game'" in message


# ------------------------------------------------------------------------------- typed overrides


def test_overrides_parse_to_the_schema_types(alfworld_raw):
    config = build(
        alfworld_raw,
        "run.seed=3",
        "optim.learning_rate=1",  # int text into a float field
        "logging.tensorboard=false",
        "env.eval_seeds=1,2",
        "model.hf_checkpoint=/ckpt/qwen",
        "credit.eta=0.5",
        "credit.include_start_state=false",
        "env.eval_tasks_per_split.eval_id=7",
    )
    assert config.run.seed == 3 and isinstance(config.run.seed, int)
    assert config.optim.learning_rate == 1.0 and isinstance(config.optim.learning_rate, float)
    assert config.logging.tensorboard is False
    assert config.env.eval_seeds == (1, 2)
    assert config.model.hf_checkpoint == "/ckpt/qwen"
    credit = config.credit_config()
    assert credit.eta == 0.5 and credit.include_start_state is False
    assert config.env.eval_tasks_per_split["eval_id"] == 7


def test_none_clears_an_optional_field_and_estimator_switches(alfworld_raw):
    config = build(alfworld_raw, "credit.stage=rcs")
    assert config.credit_config().stage == "rcs"
    config = build(alfworld_raw, "credit.stage=None", "credit.estimator=grpo")
    assert config.credit.stage is None and config.credit_config().estimator == "grpo"
    assert "applies to milegpo only" in error_of(alfworld_raw, "credit.stage=rcs", "credit.estimator=grpo")


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("run.seed=1.5", "expected int"),
        ("run.seed=-1", "run.seed=-1: a seed is an integer in 0..2**32-1"),  # was a numpy traceback 9 s into SFT
        ("run.seed=4294967296", "run.seed=4294967296: a seed is"),
        ("model.init_seed=-2", "model.init_seed=-2: a seed is"),
        ("env.eval_seeds=(1,-2)", "env.eval_seeds=-2: a seed is"),
        ("ppo.clip_low=-0.1", "ppo.clip_low=-0.1"),
        ("ppo.minibatch_rows=100", "not a multiple of ppo.microbatch_rows"),
        ("credit.estimator=milegp", "did you mean 'milegpo'"),
        ("model.preset=qwen25-1.5b", "'qwen2.5-1.5b'"),
        ("env.options.max_steps=3", "env.max_env_steps"),
        ("mesh.data=0", "mesh"),
        ("optim.schedule=cosine", "optim.decay_steps"),
        ("run.best_metric=eval_ood/success_rate", None),  # fine: alfworld evaluates eval_ood
    ],
)
def test_bad_values_fail_with_the_path_named(alfworld_raw, override, fragment):
    if fragment is None:
        build(alfworld_raw, override)
        return
    assert fragment in error_of(alfworld_raw, override)


def test_best_metric_split_is_checked_when_only_the_last_iteration_evaluates():
    # run.eval_every=0 still evaluates after the last iteration (trainer.py), so best_metric's split is needed
    demo = load_config_file(REPO / "experiments/configs/demo.py")  # evaluates eval_id only
    assert "needs split 'eval_ood'" in error_of(demo, "run.eval_every=0", "run.best_metric=eval_ood/success_rate")
    build(demo, "run.iterations=0", "run.eval_before_training=false", "run.best_metric=eval_ood/success_rate")


def test_model_sources_are_exclusive(alfworld_raw):
    message = error_of(alfworld_raw, "model.hf_checkpoint=/x", "model.preset=qwen2.5-0.5b")
    assert "exactly one of" in message
    config = build(alfworld_raw, "model.architecture.hidden_size=128")  # creates the section
    assert config.model.source == "architecture" and config.model.architecture.hidden_size == 128


def test_python_value_overrides_from_a_mapping(alfworld_raw):
    config = load_config(apply_overrides(alfworld_raw, {"credit.estimator": "gigpo", "credit.stage": None, "run.seed": 4}))
    assert (config.credit.estimator, config.credit.stage, config.run.seed) == ("gigpo", None, 4)
    with pytest.raises(ConfigError, match="expected an integer"):
        load_config(apply_overrides(alfworld_raw, {"run.seed": "4"}))


def test_apply_overrides_leaves_the_input_untouched(alfworld_raw):
    before = alfworld_raw.to_dict()
    apply_overrides(alfworld_raw, ["run.seed=9", "credit.eta=0.7"])
    assert alfworld_raw.to_dict() == before


def test_overrides_follow_field_references():
    raw = ml_collections.ConfigDict()
    steps = ml_collections.FieldReference(50)
    raw.env = ml_collections.ConfigDict({"max_env_steps": steps})
    raw.run = ml_collections.ConfigDict({"iterations": steps})
    config = load_config(apply_overrides(raw, ["env.max_env_steps=7"]))
    assert config.env.max_env_steps == 7 and config.run.iterations == 7


@pytest.mark.parametrize(
    "key, value",
    [
        ("credit.stage", None),
        ("run.seed", 5),
        ("optim.learning_rate", 3e-6),
        ("logging.progress_bar", False),
        ("env.eval_seeds", (7,)),
        ("env.eval_seeds", (1, 2, 3)),
        ("run.name", "milegpo no-pcc"),
    ],
)
def test_format_override_round_trips(alfworld_raw, key, value):
    config = load_config(apply_overrides(alfworld_raw, [format_override(key, value)]))
    section, field = key.split(".")
    assert getattr(getattr(config, section), field) == value


def test_split_config_flags():
    overrides, rest = split_config_flags(["--config", "c.py", "--config.a.b=1", "--config.c", "x=y", "--workdir", "w"])
    assert overrides == ["a.b=1", "c=x=y"]
    assert rest == ["--config", "c.py", "--workdir", "w"]


# ------------------------------------------------------------------------------- frozen, start checks


def test_config_is_frozen_and_round_trips_through_a_dict(alfworld_raw):
    config = load_config(alfworld_raw)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.run.seed = 1
    with pytest.raises(TypeError):
        config.env.eval_tasks_per_split["eval_id"] = 3
    data = to_dict(config)
    json.dumps(data)
    assert load_config(data) == config


def test_required_checkpoint_fails_at_training_start_not_at_build(alfworld_raw, tmp_path):
    config = load_config(alfworld_raw)  # builds fine without the path
    with pytest.raises(ConfigError, match=r"--config.model.hf_checkpoint=.*Qwen2.5-1.5B-Instruct|Qwen2.5-1.5B-Instruct.*--config.model.hf_checkpoint"):
        config.check_runnable()
    with pytest.raises(ConfigError, match="no config.json"):
        build(alfworld_raw, f"model.hf_checkpoint={tmp_path}").check_runnable()
    (tmp_path / "config.json").write_text("{}")
    build(alfworld_raw, f"model.hf_checkpoint={tmp_path}").check_runnable()


def test_architecture_gives_a_model_config():
    config = load_config(load_config_file(REPO / "experiments/configs/demo.py"))
    arch = config.model.architecture
    from milegpo_jax.models.model_config import ModelConfigError

    with pytest.raises(ModelConfigError, match="tokenizer's size"):  # the library's own option type
        arch.model_config()  # vocab_size 0: taken from the tokenizer
    model_config = arch.model_config(vocab_size=300, eos_token_id=7)
    assert model_config.vocab_size == 300 and model_config.hidden_size == arch.hidden_size
    assert model_config.eos_token_id == 7


def test_the_config_package_imports_without_jax():
    """Reading and checking a config needs no accelerator library: a fresh interpreter that imports
    milegpo_jax.config (and builds the demo config) has loaded neither jax nor flax."""
    code = (
        "import sys\n"
        "import milegpo_jax.config as c\n"
        f"c.load_config(c.load_config_file({str(REPO / 'experiments/configs/demo.py')!r}))\n"
        "print(sorted(m for m in ('jax', 'flax') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ------------------------------------------------------------------------------- hashing


def test_hash_ignores_what_may_change_on_resume(alfworld_raw):
    reference = config_hash(load_config(alfworld_raw))
    for override in ("run.iterations=1000", "logging.tensorboard=false", "mesh.tensor=2", "mesh.fsdp=1",
                     "env.num_servers=4", "run.keep_checkpoints=5", "run.allow_config_change=true", "run.name=x"):
        assert config_hash(build(alfworld_raw, override)) == reference, override


def test_hash_changes_with_what_defines_the_run(alfworld_raw):
    reference = config_hash(load_config(alfworld_raw))
    for override in ("ppo.kl_coef=0.02", "run.seed=1", "credit.stage=rcs", "credit.eta=0.3",
                     "env.max_env_steps=40", "model.hf_checkpoint=/other", "optim.learning_rate=2e-6"):
        assert config_hash(build(alfworld_raw, override)) != reference, override


def test_an_option_added_later_enters_the_identities_only_when_set(alfworld_raw):
    # sft.skip_repeated_prompts came after warm starts and runs were recorded: at its default it must
    # leave both the run's hash and the warm start's inputs as they were, so those still resume
    default = load_config(alfworld_raw)
    assert "skip_repeated_prompts" not in warm_start_inputs(default)["sft"]
    assert "skip_repeated_prompts" not in config_identity(default)["sft"]
    skipping = build(alfworld_raw, "sft.skip_repeated_prompts=true")
    assert warm_start_inputs(skipping)["sft"]["skip_repeated_prompts"] is True
    assert config_hash(skipping) != config_hash(default)


def test_hash_is_stable_across_processes_and_key_order(alfworld_raw):
    reference = config_hash(load_config(alfworld_raw))
    reordered = ml_collections.ConfigDict(dict(reversed(list(alfworld_raw.to_dict().items()))))
    assert config_hash(load_config(reordered)) == reference
    code = (
        "from milegpo_jax.config import load_config, load_config_file, config_hash;"
        f"print(config_hash(load_config(load_config_file({str(ALFWORLD)!r}))))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                           env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert other.stdout.strip() == reference


def test_describe_changes_lists_dotted_paths(alfworld_raw):
    old = config_identity(load_config(alfworld_raw))
    new = config_identity(build(alfworld_raw, "ppo.kl_coef=0.02", "credit.eta=0.3"))
    assert describe_changes(old, new) == ["credit.overrides.eta: '<absent>' -> 0.3", "ppo.kl_coef: 0.01 -> 0.02"]


def test_defaults_alone_build():
    assert isinstance(load_config({}), TrainConfig)



# Today's hashes of the shipped configs, pinned when the config became a package: a checkpoint written
# by an earlier run resumes only if its config still hashes the same (docs/training.md, resume).
PINNED_HASHES = {
    # model.remat full -> offload, the train step's HBM on v5e:4x4 (was 288ec190055fe93b)
    "alfworld.py": "005b2ab242c0c614",
    "base.py": "a679d59481edae61",
    # sft.epochs 10 -> 15 (was e8bde94a870a8ad9), then sampling.eval_temperature 0.4 -> 1.0 (was 55d586957acb1dda),
    # then optim.learning_rate 1e-3 -> 3e-4 (was f11b993341dd7bf5)
    "demo.py": "209640ceb45ba4f7",
    "webshop.py": "1c842d95882e1038",
    "twx.py:twc": "eddf22dfa89fbcc5",
    "twx.py:cookingworld": "5a036c837d84b2d0",
    "twx.py:coin": "86ba92966418606a",
    "twx.py:mapreader": "4948dc2934ffa490",
}


@pytest.mark.parametrize("spec, expected", sorted(PINNED_HASHES.items()))
def test_shipped_config_hashes_are_pinned(spec, expected):
    assert config_hash(load_config(load_config_file(f"{REPO / 'experiments' / 'configs'}/{spec}"))) == expected


def test_options_added_later_change_the_hash_only_when_set(alfworld_raw):
    reference = config_hash(load_config(alfworld_raw))
    assert config_hash(build(alfworld_raw, "sampling.prefix_sharing=false", "optim.trainable_layers=0",
                             "ppo.row_order=shuffled", "ppo.share_prefixes=false")) == reference
    for override in ("sampling.prefix_sharing=true", "optim.trainable_layers=4", "ppo.row_order=prefix"):
        assert config_hash(build(alfworld_raw, override)) != reference, override


def test_default_config_hash_is_pinned():
    assert config_hash(load_config({})) == "3592a0bbe3ca8dd0"


# ------------------------------------------------------------------------------- the package's seams


def test_credit_overrides_moved_into_the_section(alfworld_raw):
    message = error_of(alfworld_raw, "credit.overrides.eta=0.5")
    assert "unknown config key 'credit.overrides'" in message and "credit.eta=0.5" in message
    with pytest.raises(ConfigError, match="keys of the credit section itself"):
        load_config({"credit": {"overrides": {"eta": 0.5}}})


def test_credit_cli_set_and_config_flags_share_one_parser(alfworld_raw):
    from milegpo_jax.config import CreditOptionError, parse_credit_options
    from milegpo_jax.credit.config import CreditConfigError

    texts = ["eta=0.5", "include_start_state=false", "kappa_bc=1", "norm_mode=mean"]
    options = parse_credit_options(texts)
    assert options == {"eta": 0.5, "include_start_state": False, "kappa_bc": 1, "norm_mode": "mean"}
    config = build(alfworld_raw, *(f"credit.{text}" for text in texts))
    assert config.credit.options() == options
    with pytest.raises(CreditOptionError, match=r"unknown credit option 'etta'; did you mean 'eta'\?") as caught:
        parse_credit_options(["etta=0.5"])
    assert isinstance(caught.value, CreditConfigError)  # the credit CLIs catch their own error type
    with pytest.raises(CreditConfigError, match="omega='fast': expected float"):
        parse_credit_options(["omega=fast"])


def test_the_recipe_is_the_environments_unless_set(alfworld_raw):
    webshop = load_config_file(REPO / "experiments/configs/webshop.py")
    assert load_config(webshop).credit.recipe is None and load_config(webshop).credit_recipe == "webshop"
    assert load_config(webshop).credit_config().eta == 1.0  # WebShop's recipe
    assert build(webshop, "credit.recipe=alfworld").credit_config().eta == 0.2
    assert load_config(alfworld_raw).credit_recipe == "alfworld"


def test_alfworld_options_are_checked_without_its_interpreter(alfworld_raw):
    message = error_of(alfworld_raw, "env.options.games_dri=/x")
    assert "not an option of the alfworld adapter" in message and "'games_dir'" in message
    assert build(alfworld_raw, "env.options.expert=true").env.adapter_options()["expert"] is True


def test_building_a_config_imports_no_engine_jax_or_trainer():
    code = (
        "import sys; from milegpo_jax.config import load_config, load_config_file, config_hash;"
        f"config_hash(load_config(load_config_file({str(REPO / 'experiments/configs/twx.py')!r} + ':coin')));"
        "bad = sorted(m for m in sys.modules if m.startswith(('milegpo_jax.train', 'milegpo_jax.rollout', 'jax',"
        " 'textworld_express', 'envs_bridge.textworld_express', 'envs_bridge.webshop', 'envs_bridge.alfworld'))"
        " and m not in ('milegpo_jax.train', 'milegpo_jax.train.options', 'milegpo_jax.rollout', 'milegpo_jax.rollout.tree_shape'));"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert out.stdout.strip() == "[]"


def test_every_env_spec_names_a_credit_recipe_and_its_splits():
    from envs_bridge.base import SPLITS
    from envs_bridge.specs import SPECS
    from milegpo_jax.credit.config import RECIPES

    for spec in SPECS.values():
        assert spec.credit_recipe in RECIPES and set(spec.eval_splits) <= set(SPLITS) - {"train"}, spec.name
        assert load_config({"env": {"name": spec.name}}).credit_recipe == spec.credit_recipe
