"""Hugging Face checkpoint directories <-> ``Decoder`` models (Qwen2/Qwen2.5, Llama and Qwen3 families).

A checkpoint directory holds ``config.json`` and either ``model.safetensors`` or
``model.safetensors.index.json`` with its shards (plus, optionally, tokenizer files: see
``tokenizer.py``). What the files mean (config.json fields, tensor names and layouts) is
``hf_format.py``; this module moves the bytes between files and devices.

Loading checks everything that can be checked from the headers first (model type, unsupported
options, missing/unexpected tensors, every tensor's shape and dtype), then reads one tensor at a time
and places it straight into its target sharding with ``jax.make_array_from_callback``: each device
receives only its own shard, and the host holds one tensor at a time. A failure raises before a model
exists, so nothing half-loaded is ever returned. bf16 tensors are read through ``framework="flax"``
onto the host CPU device (numpy has no native bfloat16), others through ``framework="numpy"``.

Saving gathers one tensor at a time to the host (all processes take part; process 0 writes), in HF
names and layouts, into files of at most ``max_shard_size`` bytes; files are written to a temporary
directory and moved into place, so an interrupted save leaves no mixture of old and new shards.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax import parallel
from milegpo_jax.models.hf_format import CheckpointError, TensorMap, config_from_hf, config_to_hf, tensor_maps
from milegpo_jax.models.model_config import ModelConfig
from milegpo_jax.models.decoder import Decoder, abstract_model
from milegpo_jax.models.runtime import RuntimeOptions

CONFIG_NAME = "config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# safetensors dtype names we read
_READABLE_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
# Tensors transformers may store but that carry no information for us.
_IGNORED_TENSORS = re.compile(r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")


# ------------------------------------------------------------------------------------------- loading


def _weight_files(directory: Path) -> dict[str, Path]:
    """HF tensor name -> the safetensors file holding it (from the index, or the single file)."""
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise CheckpointError(f"{index}: not a safetensors index ({err})") from None
        files = {name: directory / file for name, file in weight_map.items()}
        for file in sorted(set(files.values())):
            if not file.is_file():
                raise FileNotFoundError(f"{file} is listed in {index} but does not exist")
        return files
    single = directory / SINGLE_FILE
    if not single.is_file():
        present = sorted(p.name for p in directory.iterdir())
        raise FileNotFoundError(f"{directory} has neither {SINGLE_FILE} nor {INDEX_FILE} (found: {present})")
    with _safe_open(single) as f:
        return {name: single for name in f.keys()}


def _safe_open(path: Path, framework: str = "numpy"):
    from safetensors import safe_open

    try:
        return safe_open(path, framework=framework)
    except Exception as err:  # safetensors raises its own error types for corrupt headers
        raise CheckpointError(f"{path}: cannot read safetensors header ({err})") from None


@contextlib.contextmanager
def _open_files(paths) -> Iterator[dict[Path, Any]]:
    with contextlib.ExitStack() as stack:
        yield {path: stack.enter_context(_safe_open(path)) for path in sorted(set(paths))}


def _check_tensors(maps: list[TensorMap], files: dict[str, Path], handles, config: ModelConfig) -> None:
    """All header-level checks, before any tensor data is read."""
    expected = {m.hf_name for m in maps}
    missing = [m.hf_name for m in maps if m.hf_name not in files]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CheckpointError(f"checkpoint is missing {len(missing)} tensor(s): {shown}")
    tied_head = {"lm_head.weight"} if config.tie_word_embeddings else set()  # transformers ties it anyway
    unexpected = sorted(
        name
        for name in files
        if name not in expected and name not in tied_head and not _IGNORED_TENSORS.fullmatch(name)
    )
    if unexpected:
        raise CheckpointError(
            f"checkpoint has tensor(s) a {config.model_type} model with this config.json does not: {', '.join(unexpected[:5])}"
        )
    for m in maps:
        info = handles[files[m.hf_name]].get_slice(m.hf_name)
        shape, dtype = tuple(info.get_shape()), info.get_dtype()
        if shape != m.hf_shape:
            raise CheckpointError(
                f"tensor {m.hf_name} in {files[m.hf_name].name} has shape {shape}; config.json implies {m.hf_shape}"
            )
        if dtype not in _READABLE_DTYPES:
            raise CheckpointError(
                f"tensor {m.hf_name} in {files[m.hf_name].name} has dtype {dtype}; readable: {sorted(_READABLE_DTYPES)}"
            )


def _read_host(name: str, path: Path, handle) -> np.ndarray:
    """One tensor as a host numpy array (bf16 through the flax framework onto the CPU device)."""
    try:
        if handle.get_slice(name).get_dtype() != "BF16":
            return handle.get_tensor(name)
        with jax.default_device(jax.local_devices(backend="cpu")[0]), _safe_open(path, "flax") as f:
            return np.asarray(f.get_tensor(name))
    except CheckpointError:
        raise
    except Exception as err:  # truncated or otherwise unreadable data
        raise CheckpointError(f"tensor {name} in {path.name}: cannot read ({err})") from None


@functools.lru_cache(maxsize=64)
def _stacker(sharding: jax.sharding.Sharding):
    """Stacks per-layer arrays into ``sharding`` (cached: same-shaped parameters share one compile)."""
    return jax.jit(lambda *layers: jnp.stack(layers), out_shardings=sharding)


def _place(host: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """Each addressable device gets only its slice of ``host``."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def load_pretrained(
    path: str | os.PathLike,
    mesh: jax.sharding.Mesh | None = None,
    *,
    runtime: RuntimeOptions | None = None,
    mode: str = "train",
) -> tuple[Decoder, ModelConfig]:
    """Load a HF Qwen2/Qwen2.5, Llama or Qwen3 checkpoint directory; returns ``(model, config)``.

    ``runtime`` (default ``RuntimeOptions()``) says how the model runs: its parameters are stored in
    ``runtime.param_dtype`` whatever the checkpoint's dtype. With a ``mesh`` every parameter lands
    directly in the sharding ``mode``'s rules give it (``milegpo_jax.parallel``) and the model
    constrains its activations by the same rules; without one, everything goes to the default device.
    """
    runtime = runtime or RuntimeOptions()
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist")
    try:
        hf_config = json.loads(config_path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{config_path}: invalid JSON ({err})") from None
    config = config_from_hf(hf_config, source=str(config_path))
    sharding = parallel.logical_sharding(mesh, mode) if mesh is not None else None
    weights_dtype = jnp.dtype(runtime.param_dtype)

    maps = tensor_maps(config, runtime.scan_layers)
    files = _weight_files(directory)
    abstract = abstract_model(config, runtime, sharding)
    graphdef, abstract_state = nnx.split(abstract)
    variables = dict(nnx.to_flat_state(abstract_state))

    def target_sharding(var, drop_layer_axis: bool):
        if sharding is None:
            return jax.sharding.SingleDeviceSharding(jax.devices()[0])
        axes = var.get_metadata()["logical_axes"]
        shape = var.shape
        if drop_layer_axis:
            axes, shape = axes[1:], shape[1:]
        return sharding.named(axes, shape)

    # Parameter by parameter (all layers of a stacked one together), so at most one parameter's
    # per-layer pieces wait on device for stacking.
    by_param: dict[tuple, list[TensorMap]] = {}
    for m in maps:
        by_param.setdefault(m.path, []).append(m)
    values: dict[tuple, Any] = {}
    with _open_files(files.values()) as handles:
        _check_tensors(maps, files, handles, config)

        def read(m: TensorMap) -> np.ndarray:
            host = m.to_ours(_read_host(m.hf_name, files[m.hf_name], handles[files[m.hf_name]]))
            return np.ascontiguousarray(host.astype(weights_dtype, copy=False))

        for key, group in by_param.items():
            var = variables[key]
            if group[0].layer is None:
                values[key] = _place(read(group[0]), target_sharding(var, False))
            else:  # scanned layers: stack on device, straight into the target layout
                layers = [_place(read(m), target_sharding(var, True)) for m in group]
                values[key] = _stacker(target_sharding(var, False))(*layers)
    for key, var in variables.items():
        if tuple(values[key].shape) != tuple(var.shape):  # a mapping bug, not bad input
            raise AssertionError(f"{key}: loaded {values[key].shape}, model expects {var.shape}")
        var.set_value(values[key])
    model = nnx.merge(graphdef, nnx.from_flat_state(variables))
    return model, config


# -------------------------------------------------------------------------------------------- saving


def _parse_size(size: int | str) -> int:
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*", size, flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"cannot parse size {size!r} (e.g. 500MB, 5GB, 1GiB)")
    unit = (match.group(2) or "B").upper()
    scale = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}[unit]
    return int(float(match.group(1)) * scale)


def _to_host(x: jax.Array) -> np.ndarray:
    if x.is_fully_addressable:
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


_ARCH_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
    "tie_word_embeddings", "model_type", "attention_bias",
)


def save_pretrained(
    model: Decoder,
    config: ModelConfig,
    path: str | os.PathLike,
    *,
    max_shard_size: int | str = "5GB",
    tokenizer: Any = None,
) -> Path:
    """Write ``model`` as a HF checkpoint directory (config.json + safetensors) that transformers loads.

    Tensors are saved in the model's ``runtime.param_dtype``; more than ``max_shard_size`` bytes of tensors go to
    ``model-0000i-of-0000n.safetensors`` files with an index. ``tokenizer`` (a transformers tokenizer),
    if given, is saved alongside. Returns the directory. On several hosts, process 0 writes; a model
    sharded across hosts must be saved by every process (they gather its tensors together).
    """
    from safetensors.numpy import save_file

    mismatched = [f for f in _ARCH_FIELDS if getattr(model.config, f) != getattr(config, f)]
    if mismatched:
        raise ValueError(f"config does not describe this model: {mismatched} differ")
    limit = _parse_size(max_shard_size)
    maps = tensor_maps(config, model.runtime.scan_layers)
    params = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
    out_dtype = jnp.dtype(model.runtime.param_dtype)
    nbytes = {m.hf_name: int(np.prod(m.hf_shape)) * out_dtype.itemsize for m in maps}

    shards: list[list[TensorMap]] = [[]]
    size = 0
    for m in maps:
        if shards[-1] and size + nbytes[m.hf_name] > limit:
            shards.append([])
            size = 0
        shards[-1].append(m)
        size += nbytes[m.hf_name]
    names = (
        [SINGLE_FILE]
        if len(shards) == 1
        else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    )

    directory = Path(path)
    writer = jax.process_index() == 0
    staging = None
    if writer:
        directory.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".saving-", dir=directory))
    try:
        for shard, name in zip(shards, names):
            tensors = {}
            for m in shard:
                value = params[m.path][...]
                if m.layer is not None:
                    value = value[m.layer]
                host = m.to_hf(_to_host(value).astype(out_dtype, copy=False))
                tensors[m.hf_name] = np.ascontiguousarray(host)
            if writer:
                save_file(tensors, staging / name, metadata={"format": "pt"})
        if writer:
            (staging / CONFIG_NAME).write_text(json.dumps(config_to_hf(config, model.runtime.param_dtype), indent=2) + "\n")
            if len(shards) > 1:
                index = {
                    "metadata": {"total_size": sum(nbytes.values())},
                    "weight_map": {m.hf_name: name for shard, name in zip(shards, names) for m in shard},
                }
                (staging / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
            # Old weights must not survive next to the new ones (a single file next to an index, or
            # shards of a different count).
            for old in list(directory.glob("model*.safetensors")) + [directory / INDEX_FILE]:
                if old.is_file():
                    old.unlink()
            for item in staging.iterdir():
                os.replace(item, directory / item.name)
            if tokenizer is not None:
                tokenizer.save_pretrained(str(directory))
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    # A model spread over several hosts is saved by all of them together: nobody reads the directory
    # before process 0 has finished it. A host-local model (e.g. process 0's warm start) is saved by
    # whoever calls this, and the caller synchronises.
    spans_hosts = any(isinstance(v[...], jax.Array) and not v[...].is_fully_addressable for v in params.values())
    if spans_hosts:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(f"save_pretrained:{directory}")
    return directory
