"""Hugging Face checkpoint directories <-> ``Qwen2`` models (Qwen2/Qwen2.5, Llama and Qwen3 families).

(Over our usual ~450 lines: load and save share the per-family key maps and header checks, which
would otherwise be split across two files that must change together.)

A checkpoint directory holds ``config.json`` and either ``model.safetensors`` or
``model.safetensors.index.json`` with its shards (plus, optionally, tokenizer files: see
``tokenizer.py``). Both spellings transformers uses are read: ``rope_theta`` (hub files, 4.x) or
``rope_parameters`` (5.x) and ``torch_dtype`` or ``dtype``; both are written, so 4.x and 5.x reload.

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
import dataclasses
import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax import parallel
from milegpo_jax.models.qwen2 import (
    MODEL_TYPES,
    Llama3RopeScaling,
    ModelConfig,
    ModelConfigError,
    Qwen2,
    abstract_model,
)

SUPPORTED_MODEL_TYPES = MODEL_TYPES
_ARCHITECTURE_NAMES = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}
CONFIG_NAME = "config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# safetensors dtype names we read, and the numpy dtypes we write.
_READABLE_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
# Tensors transformers may store but that carry no information for us.
_IGNORED_TENSORS = re.compile(r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded as-is: names the file and, where it applies, the tensor."""


class UnsupportedConfigError(CheckpointError):
    """A config.json that asks for something this port does not implement."""


# --------------------------------------------------------------------------------------- config.json


def _rope_scaling_from_hf(hf: Mapping[str, Any], source: str) -> tuple[float | None, Llama3RopeScaling | None]:
    """(rope_theta, llama3 scaling or None) from either spelling: ``rope_theta`` + ``rope_scaling``
    (hub files, transformers 4.x) or ``rope_parameters`` (5.x)."""
    rope = dict(hf.get("rope_parameters") or {})
    legacy = dict(hf.get("rope_scaling") or {})
    scaling = None
    for name, params in (("rope_parameters", rope), ("rope_scaling", legacy)):
        kind = params.get("rope_type", params.get("type", "default"))
        if kind == "default":
            continue
        if kind != "llama3":
            raise UnsupportedConfigError(
                f"{source}: {name} has rope_type {kind!r}; supported: 'default' and 'llama3'"
            )
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        missing = [key for key in keys if key not in params]
        if missing:
            raise CheckpointError(f"{source}: {name} of type llama3 lacks {missing}")
        try:
            scaling = Llama3RopeScaling(
                float(params["factor"]), float(params["low_freq_factor"]), float(params["high_freq_factor"]),
                int(params["original_max_position_embeddings"]),
            )
        except ModelConfigError as err:
            raise CheckpointError(f"{source}: {name}: {err}") from None
    return hf.get("rope_theta", rope.get("rope_theta")), scaling


def config_from_hf(hf: Mapping[str, Any], *, source: str = CONFIG_NAME) -> ModelConfig:
    """``ModelConfig`` (default runtime options) from a parsed config.json; ``source`` names it in errors."""
    model_type = hf.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedConfigError(
            f"{source}: model_type {model_type!r} is not supported (supported: {SUPPORTED_MODEL_TYPES})"
        )
    if hf.get("use_sliding_window"):
        raise UnsupportedConfigError(f"{source}: use_sliding_window is true; sliding-window attention is not supported")
    layer_types = hf.get("layer_types") or []
    if any(kind != "full_attention" for kind in layer_types):
        raise UnsupportedConfigError(
            f"{source}: layer_types {sorted(set(layer_types))}; only full_attention is supported"
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise UnsupportedConfigError(f"{source}: hidden_act {hf['hidden_act']!r}; only 'silu' is supported")
    if hf.get("mlp_bias"):
        raise UnsupportedConfigError(f"{source}: mlp_bias is true; MLP biases are not supported")
    if (hf.get("pretraining_tp") or 1) != 1:
        raise UnsupportedConfigError(f"{source}: pretraining_tp {hf['pretraining_tp']}; only 1 is supported")
    theta, scaling = _rope_scaling_from_hf(hf, source)
    if theta is None:
        raise CheckpointError(f"{source}: neither rope_theta nor rope_parameters.rope_theta is set")
    required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    missing = [key for key in required if key not in hf]
    if missing:
        raise CheckpointError(f"{source}: missing keys {missing}")
    # transformers' Qwen2 always has q/k/v biases (its config has no switch); Llama and Qwen3 read
    # attention_bias, default false.
    attention_bias = True if model_type == "qwen2" else bool(hf.get("attention_bias", False))
    try:
        return ModelConfig(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=hf["num_attention_heads"],
            num_kv_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
            head_dim=hf.get("head_dim") or 0,
            rope_theta=float(theta),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=hf.get("max_position_embeddings", 32768),
            initializer_range=float(hf.get("initializer_range", 0.02)),
            bos_token_id=hf.get("bos_token_id"),
            eos_token_id=hf.get("eos_token_id"),
            pad_token_id=hf.get("pad_token_id"),
            model_type=model_type,
            attention_bias=attention_bias,
            qk_norm=model_type == "qwen3",
            rope_scaling=scaling,
        )
    except ModelConfigError as err:
        raise CheckpointError(f"{source}: {err}") from None


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """config.json contents for ``config`` (weights saved in ``config.param_dtype``)."""
    if config.model_type == "qwen2" and not config.attention_bias:
        raise ValueError("a qwen2 checkpoint always has q/k/v biases; use model_type 'llama' without them")
    if config.qk_norm != (config.model_type == "qwen3"):
        raise ValueError(f"qk_norm={config.qk_norm} does not fit model_type {config.model_type!r} (only qwen3 has it)")
    eos = list(config.eos_token_id) if isinstance(config.eos_token_id, tuple) else config.eos_token_id
    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    if config.rope_scaling is not None:
        rope = {"rope_type": "llama3", "rope_theta": config.rope_theta, **dataclasses.asdict(config.rope_scaling)}
    hf = {
        "architectures": [_ARCHITECTURE_NAMES[config.model_type]],
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.max_position_embeddings,
        "initializer_range": config.initializer_range,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "rope_parameters": rope,
        "rope_scaling": None if config.rope_scaling is None else {k: v for k, v in rope.items() if k != "rope_theta"},
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_dropout": 0.0,
        "use_cache": True,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": eos,
        "pad_token_id": config.pad_token_id,
        "torch_dtype": config.param_dtype,
        "dtype": config.param_dtype,
    }
    if config.model_type == "llama":
        hf.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    else:
        hf.update(use_sliding_window=False, sliding_window=None, max_window_layers=config.num_layers)
    if config.model_type == "qwen3":
        hf.update(attention_bias=config.attention_bias)
    return hf


# ------------------------------------------------------------------------------------ tensor mapping


@dataclasses.dataclass(frozen=True)
class TensorMap:
    """One HF tensor <-> (a layer slice of) one of our parameters."""

    hf_name: str
    path: tuple[str | int, ...]  # of the parameter in the model's state
    layer: int | None  # index into the stacked layer axis (scanned layers), else None
    hf_shape: tuple[int, ...]
    to_ours: Callable[[np.ndarray], np.ndarray]
    to_hf: Callable[[np.ndarray], np.ndarray]


def tensor_maps(config: ModelConfig) -> list[TensorMap]:
    """Every HF tensor of a checkpoint with ``config``, in HF's order."""
    d, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    n, k, h = config.num_heads, config.num_kv_heads, config.head_dim

    def identity(x):
        return x

    def transpose(x):
        return x.T

    def in_heads(heads):  # torch [heads*h, d] <-> ours [d, heads, h]
        return (lambda x: x.T.reshape(d, heads, h)), (lambda x: x.reshape(d, heads * h).T)

    def bias(heads):
        return (lambda x: x.reshape(heads, h)), (lambda x: x.reshape(heads * h))

    out_heads = (lambda x: x.T.reshape(n, h, d)), (lambda x: x.reshape(n * h, d).T)

    maps = [TensorMap("model.embed_tokens.weight", ("embedding",), None, (v, d), identity, identity)]
    per_layer = [
        ("input_layernorm.weight", ("input_norm", "scale"), (d,), (identity, identity)),
        ("self_attn.q_proj.weight", ("attn", "q_kernel"), (n * h, d), in_heads(n)),
        ("self_attn.q_proj.bias", ("attn", "q_bias"), (n * h,), bias(n)),
        ("self_attn.k_proj.weight", ("attn", "k_kernel"), (k * h, d), in_heads(k)),
        ("self_attn.k_proj.bias", ("attn", "k_bias"), (k * h,), bias(k)),
        ("self_attn.v_proj.weight", ("attn", "v_kernel"), (k * h, d), in_heads(k)),
        ("self_attn.v_proj.bias", ("attn", "v_bias"), (k * h,), bias(k)),
        ("self_attn.o_proj.weight", ("attn", "o_kernel"), (d, n * h), out_heads),
        ("self_attn.q_norm.weight", ("attn", "q_norm", "scale"), (h,), (identity, identity)),
        ("self_attn.k_norm.weight", ("attn", "k_norm", "scale"), (h,), (identity, identity)),
        ("post_attention_layernorm.weight", ("post_attn_norm", "scale"), (d,), (identity, identity)),
        ("mlp.gate_proj.weight", ("mlp", "gate_kernel"), (f, d), (transpose, transpose)),
        ("mlp.up_proj.weight", ("mlp", "up_kernel"), (f, d), (transpose, transpose)),
        ("mlp.down_proj.weight", ("mlp", "down_kernel"), (d, f), (transpose, transpose)),
    ]
    if not config.attention_bias:
        per_layer = [row for row in per_layer if not row[0].endswith("_proj.bias")]
    if not config.qk_norm:
        per_layer = [row for row in per_layer if row[0] not in ("self_attn.q_norm.weight", "self_attn.k_norm.weight")]
    for i in range(config.num_layers):
        for suffix, sub_path, shape, (to_ours, to_hf) in per_layer:
            path = ("layers", *sub_path) if config.scan_layers else ("layers", i, *sub_path)
            layer = i if config.scan_layers else None
            maps.append(TensorMap(f"model.layers.{i}.{suffix}", path, layer, shape, to_ours, to_hf))
    maps.append(TensorMap("model.norm.weight", ("final_norm", "scale"), None, (d,), identity, identity))
    if not config.tie_word_embeddings:
        maps.append(TensorMap("lm_head.weight", ("lm_head",), None, (v, d), transpose, transpose))
    return maps


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
    dtype: str = "float32",
    *,
    compute_dtype: str | None = None,
    mode: str = "train",
    scan_layers: bool = False,
    remat: str = "none",
    attention_block: int = 0,
    attention_impl: str = "auto",
    runtime=None,
) -> tuple[Qwen2, ModelConfig]:
    """Load a HF Qwen2/Qwen2.5, Llama or Qwen3 checkpoint directory; returns ``(model, config)``.

    ``runtime``: a ``milegpo_jax.models.runtime.RuntimeOptions``; when given it replaces ``dtype``,
    ``compute_dtype``, ``scan_layers``, ``remat``, ``attention_block`` and ``attention_impl``.

    ``dtype`` is the parameter dtype (also the compute dtype unless ``compute_dtype`` is given). With a
    ``mesh`` every parameter lands directly in the sharding ``mode``'s rules give it
    (``milegpo_jax.parallel``) and the model constrains its activations by the same rules; without
    one, everything goes to the default device.
    """
    if runtime is not None:
        dtype, compute_dtype = runtime.param_dtype, runtime.compute_dtype
        scan_layers, remat, attention_block = runtime.scan_layers, runtime.remat, runtime.attention_block
        attention_impl = runtime.attention_impl
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
    # Bad runtime options are the caller's error (ModelConfigError), not the checkpoint's.
    config = config.replace(param_dtype=dtype, dtype=compute_dtype or dtype, scan_layers=scan_layers, remat=remat,
                            attention_block=attention_block, attention_impl=attention_impl)
    sharding = parallel.logical_sharding(mesh, mode) if mesh is not None else None

    maps = tensor_maps(config)
    files = _weight_files(directory)
    abstract = abstract_model(config, sharding)
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
            return np.ascontiguousarray(host.astype(config.weights_dtype, copy=False))

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
    "tie_word_embeddings", "scan_layers", "model_type", "attention_bias", "qk_norm",
)


def save_pretrained(
    model: Qwen2,
    config: ModelConfig,
    path: str | os.PathLike,
    *,
    max_shard_size: int | str = "5GB",
    tokenizer: Any = None,
) -> Path:
    """Write ``model`` as a HF checkpoint directory (config.json + safetensors) that transformers loads.

    Tensors are saved in ``config.param_dtype``; more than ``max_shard_size`` bytes of tensors go to
    ``model-0000i-of-0000n.safetensors`` files with an index. ``tokenizer`` (a transformers tokenizer),
    if given, is saved alongside. Returns the directory. On several hosts, process 0 writes; a model
    sharded across hosts must be saved by every process (they gather its tensors together).
    """
    from safetensors.numpy import save_file

    mismatched = [f for f in _ARCH_FIELDS if getattr(model.config, f) != getattr(config, f)]
    if mismatched:
        raise ValueError(f"config does not describe this model: {mismatched} differ")
    limit = _parse_size(max_shard_size)
    maps = tensor_maps(config)
    params = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
    out_dtype = config.weights_dtype
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
            (staging / CONFIG_NAME).write_text(json.dumps(config_to_hf(config), indent=2) + "\n")
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
