"""A training run's policy as a Hugging Face checkpoint: ``python -m experiments.export --workdir DIR
--out HF_DIR [--iteration N]``.

The trainer keeps its parameters in orbax checkpoints (``DIR/checkpoints/<iteration>``) and the model's
structure, config and tokenizer in ``DIR/warm_start``. This writes the newest checkpoint's parameters
(or iteration ``N``'s) with the warm start's config and tokenizer files into ``HF_DIR``, which
transformers, ``load_pretrained`` and ``experiments.play`` read. With ``optim.trainable_layers`` the
checkpoint still holds every weight, so nothing is merged. Bad input (no such run, no checkpoint, an
existing ``HF_DIR``) is one line and exit status 2; ``HF_DIR`` is written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

WARM_START_ONLY = ("config.json", "warm_start_inputs.json")  # written anew, or the trainer's own record


def checkpoint_iterations(workdir: Path) -> list[int]:
    root = workdir / "checkpoints"
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit()) if root.is_dir() else []


def export_trained(workdir: str | Path, out: str | Path, iteration: int | None = None) -> Path:
    """Writes the run's parameters at ``iteration`` (default: the newest) as a Hugging Face checkpoint."""
    import orbax.checkpoint as ocp
    from flax import nnx

    from milegpo_jax.models import RuntimeOptions, load_pretrained, save_pretrained

    workdir, out = Path(workdir), Path(out)
    iterations = checkpoint_iterations(workdir)
    if not (workdir / "warm_start" / "config.json").is_file():
        raise FileNotFoundError(f"{workdir}: no warm_start/config.json (not a training work directory)")
    if not iterations:
        raise FileNotFoundError(f"{workdir}: no checkpoints yet")
    iteration = iterations[-1] if iteration is None else iteration
    if iteration not in iterations:
        raise FileNotFoundError(f"{workdir}: no checkpoint of iteration {iteration} (have {iterations})")
    if out.exists():
        raise FileExistsError(f"{out} exists; choose a new directory")
    state = ocp.StandardCheckpointer().restore((workdir / "checkpoints" / str(iteration) / "state").resolve())
    # the run's layer layout: one stacked layer (scan_layers) or one entry per layer
    scanned = not all(str(key).isdigit() for key in state["params"]["layers"])
    model, config = load_pretrained(workdir / "warm_start", runtime=RuntimeOptions(scan_layers=scanned))
    params = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(params, state["params"])
    nnx.update(model, params)
    scratch = out.parent / f".{out.name}.tmp-{os.getpid()}"
    try:
        save_pretrained(model, config, scratch)
        for file in (workdir / "warm_start").iterdir():  # the tokenizer files and generation config
            if file.is_file() and file.name not in WARM_START_ONLY and not file.name.startswith("model"):
                shutil.copy2(file, scratch / file.name)
        os.replace(scratch, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--iteration", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        out = export_trained(args.workdir, args.out, args.iteration)
    except (FileNotFoundError, FileExistsError) as error:
        print(f"export: error: {error}", file=sys.stderr)
        sys.exit(2)
    print(out)
    return out


if __name__ == "__main__":
    main()
