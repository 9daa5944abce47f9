"""Reading a rollout file for the credit tools (``python -m milegpo_jax.credit``, ``experiments.replay``).

Every way a file can be wrong ends as one ``RolloutFormatError`` line naming the file (and the line or
the JSON place where it can): larger than the size cap (``/dev/zero`` included: at most cap + 1 bytes
are ever read), UTF-16/UTF-32 or otherwise not UTF-8, malformed JSON, nesting deeper than Python's
parser can follow, and numbers too large for a float (``1`` followed by 400 zeros, a 4,401-digit
integer: they parse as infinity and the reward check names the step). See docs/reproducibility.md for
the limits.
"""

from __future__ import annotations

import json
from pathlib import Path

from milegpo_jax.credit.rollouts import Group, RolloutFormatError, parse_rollouts

DEFAULT_MAX_INPUT_BYTES = 64 * 1024**2
_BYTE_ORDER_MARKS = (  # longest first: UTF-32's little-endian mark starts with UTF-16's
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


def _as_float(text: str) -> float:
    # JSON integers become floats here: rewards are the only numbers, and int("1" + "0" * 4400)
    # would raise Python's 4,300-digit limit instead of reaching the reward check.
    return float(text)


def read_rollout_file(path: str | Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[Group]:
    """Reads, decodes, parses and validates a rollout JSON file of at most ``max_bytes`` bytes."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise RolloutFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RolloutFormatError(f"{path}: is a directory, not a rollout file") from None
    except OSError as error:
        raise RolloutFormatError(f"{path}: cannot read ({error.strerror or error})") from None
    if len(data) > max_bytes:
        raise RolloutFormatError(f"{path}: larger than the input limit of {max_bytes} bytes (raise it with --max-input-bytes)")
    for mark, encoding in _BYTE_ORDER_MARKS:
        if data.startswith(mark):
            raise RolloutFormatError(f"{path}: the file is {encoding} text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise RolloutFormatError(f"{path}: line {line}: not UTF-8 text (byte {error.start} is 0x{data[error.start]:02x})") from None
    try:
        raw = json.loads(text, parse_int=_as_float)
    except json.JSONDecodeError as error:
        raise RolloutFormatError(f"{path}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    except RecursionError:
        raise RolloutFormatError(f"{path}: JSON nested too deeply to read") from None
    try:
        return parse_rollouts(raw)
    except RecursionError:  # pragma: no cover - parse_rollouts walks a fixed depth
        raise RolloutFormatError(f"{path}: JSON nested too deeply to read") from None
