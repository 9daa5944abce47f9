"""Every config in experiments/configs builds and validates; the paper recipes hold the paper's numbers."""

from pathlib import Path

import pytest

from experiments.configs import twx
from milegpo_jax.config import ConfigError, config_hash, load_config, load_config_file

CONFIG_DIR = Path(__file__).resolve().parents[2] / "experiments" / "configs"
CONFIG_FILES = sorted(p for p in CONFIG_DIR.glob("*.py") if p.name != "__init__.py")
SPECS = [str(p) for p in CONFIG_FILES] + [f"{CONFIG_DIR / 'twx.py'}:{game}" for game in twx.MAX_ENV_STEPS]


def test_the_expected_configs_exist():
    assert {p.stem for p in CONFIG_FILES} >= {"base", "alfworld", "webshop", "twx", "demo"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: Path(s).name)
def test_config_builds_and_validates(spec):
    config = load_config(load_config_file(spec))
    config.credit_config()  # the estimator's own validation
    assert len(config_hash(config)) == 16
    assert config.env.adapter_options()["max_steps"] == config.env.max_env_steps


def test_unknown_twx_game_is_rejected():
    with pytest.raises(ValueError, match="unknown game"):
        load_config_file(f"{CONFIG_DIR / 'twx.py'}:zork")


@pytest.mark.parametrize("name, steps, minibatch, microbatch, prompt", [
    ("alfworld", 50, 256, 64, 2048),
    ("webshop", 30, 64, 4, 4096),
])
def test_paper_recipes(name, steps, minibatch, microbatch, prompt):
    config = load_config(load_config_file(CONFIG_DIR / f"{name}.py"))
    assert config.model.name == "Qwen2.5-1.5B-Instruct" and config.model.source is None
    assert (config.env.name, config.env.max_env_steps, config.env.history_length) == (name, steps, 2)
    assert (config.env.groups_per_iteration, config.env.group_size) == (16, 8)
    assert config.env.eval_seeds == (123, 456, 789)
    assert (config.sampling.temperature, config.sampling.eval_temperature, config.sampling.max_prompt_tokens) == (1.0, 0.4, prompt)
    assert (config.optim.learning_rate, config.optim.grad_clip_norm, config.optim.schedule) == (1e-6, 1.0, "constant")
    ppo = config.ppo
    assert (ppo.clip_low, ppo.clip_high, ppo.kl_coef, ppo.kl_estimator, ppo.entropy_coef, ppo.epochs) == (
        0.2, 0.2, 0.01, "low_var_kl", 0.001, 1)
    assert (ppo.minibatch_rows, ppo.microbatch_rows, ppo.loss_agg) == (minibatch, microbatch, "token-mean")
    assert (config.run.iterations, config.run.eval_every) == (300, 5)
    credit = config.credit_config()
    assert credit.estimator == "milegpo" and credit.stage == "full"
    # the recipe split of paper Table 5
    assert (credit.eta, credit.theta_m, credit.rho, credit.kappa_bc, credit.norm_mode) == (
        (0.2, 1.1, 0.0, 0, "mean_std") if name == "alfworld" else (1.0, 0.5, 0.5, 1, "mean"))
    with pytest.raises(ConfigError, match="model.hf_checkpoint"):
        config.check_runnable()


def test_demo_is_a_small_cpu_run():
    config = load_config(load_config_file(CONFIG_DIR / "demo.py"))
    assert config.model.source == "architecture"
    arch = config.model.architecture
    assert 64 <= arch.hidden_size <= 128 and 2 <= arch.num_layers <= 4
    assert (config.model.param_dtype, config.model.compute_dtype) == ("float32", "float32")
    assert config.env.name == "textworld_express" and config.env.options["game"] == "coin"
    assert (config.env.groups_per_iteration, config.env.group_size) == (8, 8)
    assert config.env.max_env_steps <= 10 and config.sampling.max_new_tokens <= 32
    assert config.run.eval_before_training and "eval_id" in config.env.eval_tasks_per_split
    assert config.sft.episodes > 0
    config.check_runnable()  # an inline architecture needs nothing on disk


def test_the_real_llm_recipe_trains_the_converted_smollm2():
    """docs/results/real-llm.md: the converted SmolLM2 checkpoint (runnable here), MileGPO full on
    TextWorldExpress coin, 64 held-out tasks at the sampling temperature, and the speed levers on."""
    config = load_config(load_config_file(CONFIG_DIR / "smollm2_twx.py"))
    config.check_runnable()  # the cached conversion exists
    assert Path(config.model.hf_checkpoint, "config.json").is_file()
    assert (config.env.name, config.env.options["game"]) == ("textworld_express", "coin")
    assert config.env.eval_tasks_per_split["eval_id"] >= 64
    assert config.sampling.eval_temperature == config.sampling.temperature
    assert config.sampling.prefix_sharing and config.optim.trainable_layers > 0 and config.ppo.kl_coef == 0
    assert config.sft.episodes > 0 and config.run.eval_before_training
    credit = config.credit_config()
    assert credit.estimator == "milegpo" and credit.stage == "full"


def test_the_main_job_is_the_real_llm_recipe_cut_short():
    """``smollm2_twx.py:main`` (the README's main job) differs from the recipe only in its run length and
    evaluations: fewer iterations, evaluated before RL and after the last iteration only."""
    from milegpo_jax.config.identity import to_dict

    recipe = to_dict(load_config(load_config_file(CONFIG_DIR / "smollm2_twx.py")))
    main = load_config(load_config_file(f"{CONFIG_DIR / 'smollm2_twx.py'}:main"))
    differ = {(section, key) for section, values in to_dict(main).items() if isinstance(values, dict)
              for key, value in values.items() if recipe[section][key] != value}
    assert differ == {("run", "iterations"), ("run", "eval_every"), ("run", "name")}
    assert main.run.iterations < recipe["run"]["iterations"] and main.run.eval_every == 0 and main.run.eval_before_training
    with pytest.raises(ValueError, match="unknown variant"):
        load_config_file(f"{CONFIG_DIR / 'smollm2_twx.py'}:short")
