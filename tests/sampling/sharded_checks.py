"""The sampler on 8 fake CPU devices equals the single-device sampler. Run by ``test_sharded.py`` in a
child process, because the XLA device count is fixed when jax first initialises (not collected on its
own: the name has no test_).

By hand: ``XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m pytest tests/sampling/sharded_checks.py``.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from milegpo_jax import parallel
from milegpo_jax.models import load_pretrained
from milegpo_jax.sampling import SamplingConfig, generate, sampler as sampler_module
from tests.sampling.helpers import prompts_of_lengths

if jax.device_count() != 8:
    raise RuntimeError(
        f"sharded_checks.py needs 8 devices, found {jax.device_count()}: "
        "set XLA_FLAGS=--xla_force_host_platform_device_count=8 before starting Python"
    )

LENGTHS = (9, 3, 14, 6, 1, 11, 2)  # 7 rows: a batch of 8, one row per device
BUDGET = 10


@pytest.fixture(scope="module")
def models(checkpoint):
    """(single-device model, sample-mode model on data 2 x fsdp 2 x tensor 2, train->sample re-laid out)."""
    _, path = checkpoint
    plain, _ = load_pretrained(path)
    mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    sampler, _ = load_pretrained(path, mesh=mesh, mode="sample")
    trained, _ = load_pretrained(path, mesh=mesh, mode="train")
    return plain, sampler, parallel.shard_model(trained, mesh, "sample")


def _assert_same(got, want):
    np.testing.assert_array_equal(got.token_ids, want.token_ids)
    np.testing.assert_array_equal(got.lengths, want.lengths)
    assert got.finish_reasons == want.finish_reasons
    np.testing.assert_allclose(got.policy_logprobs, want.policy_logprobs, atol=1e-5)
    np.testing.assert_allclose(got.sampling_logprobs, want.sampling_logprobs, atol=1e-5)


def test_sharded_greedy_and_sampling_equal_single_device(models):
    plain, sampler, relaid = models
    prompts = prompts_of_lengths(LENGTHS, seed=40)
    greedy = SamplingConfig(max_new_tokens=BUDGET, temperature=0.0)
    want = generate(plain, prompts, greedy)
    # Stop on tokens the greedy run emits, so EOS, stop and length all occur.
    stops = greedy.replace(
        eos_ids=(int(want.token_ids[0, 3]),), stop_sequences=(tuple(want.token_ids[1, 2:4].tolist()),)
    )
    limits = [BUDGET, BUDGET, 4, BUDGET, 6, BUDGET, 2]
    sampling = SamplingConfig(max_new_tokens=BUDGET, temperature=0.9, top_k=40, top_p=0.95)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "Some donated buffers were not usable": layouts must agree
        for config, kwargs in [(greedy, {}), (stops, {"max_new_tokens": limits}), (sampling, {"key": 3})]:
            want = generate(plain, prompts, config, **kwargs)
            for model in (sampler, relaid):
                _assert_same(generate(model, prompts, config, **kwargs), want)
    assert {"eos", "stop", "length"} <= set(generate(plain, prompts, stops, max_new_tokens=limits).finish_reasons)


def test_decode_state_is_laid_out_by_the_sample_rules(models, monkeypatch):
    """Rows over data x fsdp, KV heads over tensor: the cache and outputs as the loop leaves them."""
    _, sampler, _ = models
    decoded = []
    decode = sampler_module.decode

    def keep_result(*args, **kwargs):
        decoded.append(decode(*args, **kwargs))
        return decoded[-1]

    monkeypatch.setattr(sampler_module, "decode", keep_result)
    generate(sampler, prompts_of_lengths(LENGTHS, seed=40), SamplingConfig(max_new_tokens=BUDGET, temperature=0.0))
    state = decoded[0]
    rows = ("data", "fsdp")
    for array, spec in [
        (state.cache.keys, P(None, rows, None, "tensor", None)),
        (state.cache.values, P(None, rows, None, "tensor", None)),
        (state.token_ids, P(rows, None)),
        (state.policy_logprobs, P(rows, None)),
        (state.finish, P(rows)),
    ]:
        assert array.sharding.is_equivalent_to(NamedSharding(array.sharding.mesh, spec), array.ndim), (
            array.sharding.spec, spec,
        )


def test_host_local_copy_samples_like_the_single_device_model(checkpoint):
    """multihost.host_local_copy: the trainer's sampling copy (train layout -> this host's sub-mesh,
    here all 8 devices as data 4 x fsdp 1 x tensor 2) gives the single-device results."""
    from milegpo_jax import multihost

    _, path = checkpoint
    plain, _ = load_pretrained(path)
    mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    trained, _ = load_pretrained(path, mesh=mesh, mode="train")
    copy = multihost.host_local_copy(trained, mesh)
    assert dict(copy.sharding.mesh.shape) == {"data": 4, "fsdp": 1, "tensor": 2}
    assert set(copy.sharding.mesh.devices.flat) == set(jax.devices())
    prompts = prompts_of_lengths(LENGTHS, seed=41)
    for config, key in [(SamplingConfig(max_new_tokens=BUDGET, temperature=0.0), None),
                        (SamplingConfig(max_new_tokens=BUDGET, temperature=0.9, top_k=40), 5)]:
        _assert_same(generate(copy, prompts, config, key=key), generate(plain, prompts, config, key=key))


def test_prefix_sharing_under_the_mesh_equals_a_full_single_device_prefill(models):
    """Group prefix sharing on data 2 x fsdp 2 x tensor 2: the prefix row and the suffix rows placed
    over the mesh, the cache gathered to every row; the same tokens as the plain single-device run."""
    from tests.sampling.test_prefix_sharing import rollout_like_prompts

    plain, sampler, _ = models
    prompts = rollout_like_prompts()
    for config, key in [(SamplingConfig(max_new_tokens=BUDGET, temperature=0.0), None),
                        (SamplingConfig(max_new_tokens=BUDGET, temperature=0.9, top_k=40), 5)]:
        want = generate(plain, prompts, config, key=key)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # donated decode state: the shared prefill must lay it out the same
            got = generate(sampler, prompts, config.replace(prefix_sharing=True), key=key)
        _assert_same(got, want)
        assert got.prefill_positions < want.prefill_positions


def test_kernel_prefill_under_the_mesh_equals_the_dense_single_device_prefill(checkpoint, models):
    """Splash (Pallas's interpreter) in a shard_map per device for the plain and the shared prefill:
    rows over data x fsdp, heads over tensor, the suffix's keys starting at the prefix's slots."""
    from milegpo_jax.models.runtime import RuntimeOptions
    from tests.sampling.test_kernel_prefill import kernel_sized_prompts

    plain, _, _ = models
    mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    fused, _ = load_pretrained(checkpoint[1], mesh=mesh, mode="sample", runtime=RuntimeOptions(attention_impl="splash"))
    prompts = kernel_sized_prompts()
    config = SamplingConfig(max_new_tokens=4, temperature=0.0)
    assert fused.prefill_uses_kernel(256, 0) and fused.prefill_uses_kernel(128, 128)
    for sharing in (False, True):
        _assert_same(generate(fused, prompts, config.replace(prefix_sharing=sharing)), generate(plain, prompts, config))
