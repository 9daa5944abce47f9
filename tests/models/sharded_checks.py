"""Sharding on 8 fake CPU devices. Run by ``test_parallel.py`` in a child process, because the XLA
device count is fixed when jax first initialises (not collected on its own: the name has no test_).

By hand: ``XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m pytest tests/models/sharded_checks.py``.
"""

from __future__ import annotations

import socket

from milegpo_jax import multihost, parallel


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The multi-host hook for real: a one-process "cluster" with its own coordinator, joined before any
# JAX computation, as a pod entry point would.
PROCESS = multihost.initialize(f"127.0.0.1:{_free_port()}", num_processes=1, process_id=0)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from transformers import Qwen2ForCausalLM  # noqa: E402

from milegpo_jax.models import RuntimeOptions, load_pretrained, save_pretrained, token_logprobs  # noqa: E402
from milegpo_jax.sampling import SamplingConfig, generate  # noqa: E402
from tests.models.helpers import forward, make_hf_model, random_ids, torch_logits  # noqa: E402

if jax.device_count() != 8:
    raise RuntimeError(
        f"sharded_checks.py needs 8 devices, found {jax.device_count()}: "
        "set XLA_FLAGS=--xla_force_host_platform_device_count=8 before starting Python"
    )

FSDP_TP = {"data": 1, "fsdp": 4, "tensor": 2}


def test_multihost_hook_joined_a_cluster():
    assert PROCESS == (0, 1) and jax.distributed.is_initialized()
    assert multihost.initialize("127.0.0.1:1", num_processes=1, process_id=0) == (0, 1)  # again: no-op


def _laid_out(array, spec) -> bool:
    """Same placement as ``spec`` (specs differ in trailing Nones, placements do not)."""
    return array.sharding.is_equivalent_to(jax.sharding.NamedSharding(array.sharding.mesh, spec), array.ndim)


def _params(model):
    return dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))


def _assert_placed_by_rules(model, mesh, mode):
    """Every parameter's sharding is what the rules table says for its logical axes and shape."""
    rules = parallel.RULES[mode]
    for path, var in _params(model).items():
        value = var[...]
        want = parallel.logical_to_spec(var.get_metadata()["logical_axes"], rules, mesh, value.shape)
        assert value.sharding.mesh == mesh and _laid_out(value, want), (path, value.sharding.spec, want)


def _jitted_forward(model, batch_shape):
    """jit with explicit in/out shardings (what "pjit" is today)."""
    graphdef, state = nnx.split(model)
    sh = model.sharding
    ids_sharding = sh.named(("batch", "seq"), batch_shape)
    logits_sharding = sh.named(("batch", "seq", "act_vocab"), (*batch_shape, model.config.vocab_size))
    fn = jax.jit(
        lambda state, ids: nnx.merge(graphdef, state)(ids),
        in_shardings=(parallel.state_shardings(state, sh), ids_sharding),
        out_shardings=logits_sharding,
    )
    return lambda ids: fn(state, jax.device_put(ids, ids_sharding))


def test_fsdp_tensor_forward_equals_unsharded(hf_checkpoint):
    torch_model, path = hf_checkpoint
    ids = random_ids(8, 10)
    plain, config = load_pretrained(path)
    want = forward(plain, ids)
    np.testing.assert_allclose(want, torch_logits(torch_model, ids), atol=1e-4)

    mesh = parallel.make_mesh(FSDP_TP)
    model, _ = load_pretrained(path, mesh=mesh)
    _assert_placed_by_rules(model, mesh, "train")
    params = _params(model)
    d, n, h, v = config.hidden_size, config.num_heads, config.head_dim, config.vocab_size
    q = params[("layers", 0, "attn", "q_kernel")][...]
    assert _laid_out(q, P("fsdp", "tensor", None))
    assert {s.data.shape for s in q.addressable_shards} == {(d // 4, n // 2, h)}
    emb = params[("embedding",)][...]
    assert {s.data.shape for s in emb.addressable_shards} == {(v // 2, d // 4)}
    norm = params[("final_norm", "scale")][...]
    assert norm.sharding.is_fully_replicated

    logits = _jitted_forward(model, ids.shape)(ids)
    assert _laid_out(logits, P("fsdp", None, "tensor"))
    np.testing.assert_allclose(np.asarray(logits), want, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_llama_and_qwen3_sharded_train_and_sample(family, tmp_path):
    """Both families under FSDP x TP (train rules, scanned) and re-laid out for sampling, vs transformers."""
    torch_model = make_hf_model(tied=family == "llama", seed=6, family=family)
    torch_model.save_pretrained(tmp_path)
    ids = random_ids(8, 10)
    want = torch_logits(torch_model, ids)
    mesh = parallel.make_mesh(FSDP_TP)
    model, _ = load_pretrained(tmp_path, mesh=mesh, runtime=RuntimeOptions(scan_layers=True))
    _assert_placed_by_rules(model, mesh, "train")
    np.testing.assert_allclose(np.asarray(_jitted_forward(model, ids.shape)(ids)), want, atol=1e-4)
    sampler_model = parallel.shard_model(model, mesh, "sample")
    _assert_placed_by_rules(sampler_model, mesh, "sample")
    prompts = [list(row[:6]) for row in ids[:4]]
    rows = generate(sampler_model, prompts, SamplingConfig(max_new_tokens=6, temperature=0.0)).rows()
    plain, _ = load_pretrained(tmp_path)
    plain_rows = generate(plain, prompts, SamplingConfig(max_new_tokens=6, temperature=0.0)).rows()
    assert [list(r.token_ids) for r in rows] == [list(r.token_ids) for r in plain_rows]


def test_kv_heads_replicated_when_tensor_axis_exceeds_them(tied_checkpoint):
    _, path = tied_checkpoint
    mesh = parallel.make_mesh({"data": 2, "fsdp": 1, "tensor": 4})
    model, config = load_pretrained(path, mesh=mesh)
    assert config.num_kv_heads == 2
    _assert_placed_by_rules(model, mesh, "train")
    params = _params(model)
    assert params[("layers", 0, "attn", "k_kernel")][...].sharding.is_fully_replicated
    assert _laid_out(params[("layers", 0, "attn", "q_kernel")][...], P(None, "tensor", None))
    ids = random_ids(4, 6)
    plain, _ = load_pretrained(path)
    np.testing.assert_allclose(np.asarray(_jitted_forward(model, ids.shape)(ids)), forward(plain, ids), atol=1e-5)


@nnx.jit
def _cached_step(model, ids, mask, cache):
    return model(ids, attention_mask=mask, cache=cache)


def test_sample_mode_scanned_kv_cache_decode(hf_checkpoint):
    """Sampler layout: weights whole on fsdp devices, cache sharded by batch and KV heads."""
    _, path = hf_checkpoint
    mesh = parallel.make_mesh(FSDP_TP)
    model, config = load_pretrained(path, mesh=mesh, mode="sample", runtime=RuntimeOptions(scan_layers=True))
    _assert_placed_by_rules(model, mesh, "sample")
    assert _laid_out(_params(model)[("embedding",)][...], P("tensor", None))

    ids = random_ids(4, 9, seed=3)
    mask = np.ones_like(ids)
    mask[1, :3] = 0  # a left-padded row
    plain, _ = load_pretrained(path)
    want = forward(plain, ids, mask)

    cache = model.init_cache(4, 9)
    assert _laid_out(cache.keys, P(None, "fsdp", None, "tensor", None))
    logits, cache = _cached_step(model, jnp.asarray(ids[:, :6]), jnp.asarray(mask[:, :6]), cache)
    got = [np.asarray(logits)]
    for t in range(6, 9):
        logits, cache = _cached_step(model, jnp.asarray(ids[:, t : t + 1]), None, cache)
        got.append(np.asarray(logits))
    assert _laid_out(cache.keys, P(None, "fsdp", None, "tensor", None))
    got = np.concatenate(got, axis=1)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=2e-5)


def test_shard_model_switches_train_to_sample(tied_checkpoint):
    _, path = tied_checkpoint
    mesh = parallel.make_mesh(FSDP_TP)
    trained, _ = load_pretrained(path, mesh=mesh)
    sampler = parallel.shard_model(trained, mesh, "sample")
    _assert_placed_by_rules(sampler, mesh, "sample")
    _assert_placed_by_rules(trained, mesh, "train")  # the original is untouched
    ids = random_ids(8, 5)
    np.testing.assert_allclose(forward(sampler, ids), forward(trained, ids), atol=1e-5)


def test_chunked_logprobs_and_gradients_sharded(tied_checkpoint):
    """A train-step-shaped jit: FSDP x TP parameters in, gradients out in the parameters' layout."""
    _, path = tied_checkpoint
    mesh = parallel.make_mesh(FSDP_TP)
    ids = jnp.asarray(random_ids(8, 12, seed=4))

    def value_and_grad_fn(graphdef):
        def loss(state):
            model = nnx.merge(graphdef, state)
            return jnp.mean(token_logprobs(model, ids[:, :-1], ids[:, 1:], chunk_size=4))

        return jax.value_and_grad(loss)

    plain, _ = load_pretrained(path)
    graphdef, state = nnx.split(plain, nnx.Param)
    want_value, want_grads = jax.jit(value_and_grad_fn(graphdef))(state)

    model, _ = load_pretrained(path, mesh=mesh, runtime=RuntimeOptions(scan_layers=True, remat="full"))
    graphdef, state = nnx.split(model, nnx.Param)
    state_sh = parallel.state_shardings(state, model.sharding)
    step = jax.jit(value_and_grad_fn(graphdef), in_shardings=(state_sh,), out_shardings=(None, state_sh))
    value, grads = step(state)
    np.testing.assert_allclose(float(value), float(want_value), rtol=1e-5)
    got = dict(nnx.to_flat_state(grads))
    for path_, var in nnx.to_flat_state(want_grads):
        if path_[0] == "layers":  # plain layer i <-> row i of the stacked gradient
            np.testing.assert_allclose(
                np.asarray(got[("layers", *path_[2:])][...][path_[1]]), np.asarray(var[...]), atol=1e-6
            )
        else:
            np.testing.assert_allclose(np.asarray(got[path_][...]), np.asarray(var[...]), atol=1e-6)
    params = _params(model)
    for path_, var in got.items():
        assert _laid_out(var[...], params[path_][...].sharding.spec), path_


KV_REPEATED = {"data": 2, "fsdp": 1, "tensor": 4}


@pytest.mark.parametrize("impl, shape", [("splash", FSDP_TP), ("gpu_flash", KV_REPEATED)],
                         ids=["splash-kv_split", "gpu_flash-kv_repeated"])
def test_fused_attention_kernels_sharded(tied_checkpoint, impl, shape):
    """A kernel per device in a shard_map (Pallas interpreter): rows over data/fsdp, heads over tensor
    (the 2 KV heads repeated when 4 tensor devices cannot split them); log-probs and gradients of a
    scanned, rematerialised packed forward equal the unsharded dense model's."""
    from tests.models.test_attention import _packed_segments

    _, path = tied_checkpoint
    rng = np.random.default_rng(11)
    segments = jnp.asarray(_packed_segments(rng, 4, 256, 120))
    ids = jnp.asarray(rng.integers(0, 512, (4, 256)), jnp.int32) * (segments != 0)

    def value_and_grad_fn(graphdef):
        def loss(state):
            model = nnx.merge(graphdef, state)
            logprobs = token_logprobs(model, ids, jnp.roll(ids, -1, axis=1), attention_mask=segments)
            return jnp.sum(jnp.where(segments != 0, logprobs, 0.0))

        return jax.value_and_grad(loss)

    plain, _ = load_pretrained(path, runtime=RuntimeOptions(attention_impl="xla"))
    graphdef, state = nnx.split(plain, nnx.Param)
    want_value, want_grads = jax.jit(value_and_grad_fn(graphdef))(state)

    mesh = parallel.make_mesh(shape)
    model, _ = load_pretrained(path, mesh=mesh, runtime=RuntimeOptions(scan_layers=True, remat="full", attention_impl=impl))
    graphdef, state = nnx.split(model, nnx.Param)
    state_sh = parallel.state_shardings(state, model.sharding)
    value, grads = jax.jit(value_and_grad_fn(graphdef), in_shardings=(state_sh,), out_shardings=(None, state_sh))(state)
    np.testing.assert_allclose(float(value), float(want_value), rtol=1e-5)
    got = dict(nnx.to_flat_state(grads))
    for path_, var in nnx.to_flat_state(want_grads):
        mine = got[("layers", *path_[2:])][...][path_[1]] if path_[0] == "layers" else got[path_][...]
        np.testing.assert_allclose(np.asarray(mine), np.asarray(var[...]), atol=2e-4, err_msg=str(path_))


def test_save_from_sharded_scanned_model(hf_checkpoint, tmp_path):
    torch_model, path = hf_checkpoint
    mesh = parallel.make_mesh(FSDP_TP)
    model, config = load_pretrained(path, mesh=mesh, runtime=RuntimeOptions(scan_layers=True))
    out = save_pretrained(model, config, tmp_path / "saved", max_shard_size="100KB")
    reloaded = Qwen2ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    original = torch_model.state_dict()
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, original[name]), name


@pytest.fixture(autouse=True)
def _no_leaked_explicit_mesh():
    """Auto axes only: nothing here may rely on an ambient (explicit) mesh."""
    yield
    assert jax.sharding.get_abstract_mesh().empty


def test_random_init_is_created_in_place():
    from milegpo_jax.models import ModelConfig, init_model

    mesh = parallel.make_mesh(FSDP_TP)
    config = ModelConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
    )
    model = init_model(config, RuntimeOptions(scan_layers=True), sharding=parallel.logical_sharding(mesh, "train"))
    _assert_placed_by_rules(model, mesh, "train")
