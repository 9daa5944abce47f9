"""The exact Qwen2.5 tokenizer, built offline from the official vocabulary file.

There is no hub access, so ``tokenizer.json`` is constructed from ``qwen.tiktoken`` as shipped in the
``dashscope`` package (Alibaba Cloud; installed with ``--no-deps``: only the data file is used). The
file holds the 151,643 byte-level BPE ranks of Qwen2/Qwen2.5; the recipe (docs/architecture.md §6.3):

1. ranks ``bytes -> id`` from ``base64 rank`` lines;
2. bytes -> unicode with the GPT-2 byte table (what byte-level BPE in ``tokenizers`` expects);
3. merges derived from the ranks: re-run BPE on every multi-byte token, stopping before any merge whose
   rank is not below the token's own; the two parts left are its merge;
4. Qwen's pre-tokenizer regex, NFC normaliser and byte-level decoder;
5. the 22 added tokens with fixed ids 151643-151664 (14 special).

``build_qwen25_tokenizer(directory)`` writes ``tokenizer.json`` and ``tokenizer_config.json`` (with a
Qwen2.5 chat template) there and is cached: a stamp records the vocabulary's sha256 and the builder
version, so a second call returns at once. ``load_tokenizer(directory)`` is
``transformers.AutoTokenizer`` on any local directory (ours or a checkpoint's), offline; a directory
without tokenizer files or a chat template is refused first (``TokenizerFilesError``, naming the file),
where transformers would build a tokenizer that fails later, deep inside the chat template.

Ids to remember: ``<|endoftext|>`` 151643 (pad; end of a base-model document), ``<|im_start|>``
151644, ``<|im_end|>`` 151645 (end of an instruct turn). ``len(tokenizer)`` is 151,665 while the
model's embedding has 151,936 (or 152,064) rows: size anything vocabulary-shaped from the model config.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path

QWEN_TIKTOKEN_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
NUM_BASE_TOKENS = 151_643
# Bump when the files written here change, so cached directories are rebuilt.
_BUILDER_VERSION = "1"
_STAMP = ".milegpo-tokenizer-stamp"

PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Added after the special ones, in this order; they are ordinary (non-special) added tokens.
PLAIN_ADDED_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
ENDOFTEXT_ID, IM_START_ID, IM_END_ID = 151643, 151644, 151645

DEFAULT_SYSTEM_PROMPT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# Qwen2.5's ChatML for plain conversations: the system turn (or the default one when the conversation
# has none), every message as <|im_start|>role\ncontent<|im_end|>\n, then the assistant header when a
# generation prompt is asked for. Tool calls are not rendered (the RL prompts do not use them).
CHAT_TEMPLATE = (
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- set rest = messages[1:] -%}"
    "{%- else -%}"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM_PROMPT + "<|im_end|>\\n' -}}"
    "{%- set rest = messages -%}"
    "{%- endif -%}"
    "{%- for message in rest -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


class TokenizerSourceError(RuntimeError):
    """The official vocabulary file is missing or is not the expected one."""


def qwen_tiktoken_path() -> Path:
    """Path of ``qwen.tiktoken`` inside the installed ``dashscope`` package (data only, never imported)."""
    spec = importlib.util.find_spec("dashscope")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerSourceError(
            "the Qwen vocabulary comes from the 'dashscope' package, which is not installed; "
            "run `pip install --no-deps dashscope==2.0.2` (experiments/bootstrap.sh does)"
        )
    path = Path(spec.submodule_search_locations[0]) / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise TokenizerSourceError(f"{path} is missing from the installed dashscope package")
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_ranks(path: Path) -> dict[bytes, int]:
    """``qwen.tiktoken`` lines ``base64(token) rank`` -> ``{token bytes: rank}``."""
    ranks = {}
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as err:
            raise TokenizerSourceError(f"{path}:{line_no}: not a 'base64 rank' line ({err})") from None
    return ranks


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _merge_of(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """The pair BPE merges last to form ``token``: BPE on its bytes, allowing only lower-rank merges."""
    own_rank = ranks[token]
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best_rank, best_at = own_rank, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best_rank, best_at = rank, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    if len(parts) != 2:
        raise TokenizerSourceError(f"token of rank {own_rank} cannot be formed by one merge of lower-rank tokens")
    return parts[0], parts[1]


def build_tokenizer_object(tiktoken_path: Path | None = None):
    """The Qwen2.5 ``tokenizers.Tokenizer`` (fast, Rust) from the official ranks."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    path = tiktoken_path or qwen_tiktoken_path()
    digest = _sha256(path)
    if digest != QWEN_TIKTOKEN_SHA256:
        raise TokenizerSourceError(f"{path} has sha256 {digest}, expected the official {QWEN_TIKTOKEN_SHA256}")
    ranks = read_ranks(path)
    if len(ranks) != NUM_BASE_TOKENS or sorted(ranks.values()) != list(range(NUM_BASE_TOKENS)):
        raise TokenizerSourceError(f"{path}: expected ranks 0..{NUM_BASE_TOKENS - 1}, got {len(ranks)} entries")
    to_char = byte_to_unicode()

    def text(token: bytes) -> str:
        return "".join(to_char[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [
        (text(left), text(right))
        for token, _ in sorted(ranks.items(), key=lambda item: item[1])
        if len(token) > 1
        for left, right in [_merge_of(token, ranks)]
    ]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, use_regex=False)
    # One at a time: the ids are assigned in call order and must be exactly 151643.. as in Qwen2.5.
    for content in SPECIAL_TOKENS + PLAIN_ADDED_TOKENS:
        tok.add_tokens([AddedToken(content, special=content in SPECIAL_TOKENS, normalized=False)])
    for content, want in (("<|endoftext|>", ENDOFTEXT_ID), ("<|im_end|>", IM_END_ID), ("<|file_sep|>", 151664)):
        if tok.token_to_id(content) != want:
            raise TokenizerSourceError(f"{content} got id {tok.token_to_id(content)}, expected {want}")
    return tok


def tokenizer_config() -> dict:
    """``tokenizer_config.json`` for ``AutoTokenizer`` (the instruct model's special-token roles)."""
    return {
        "tokenizer_class": "Qwen2Tokenizer",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "additional_special_tokens": list(SPECIAL_TOKENS[1:]),
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "chat_template": CHAT_TEMPLATE,
    }


def build_qwen25_tokenizer(directory: str | os.PathLike, *, force: bool = False) -> Path:
    """Write the Qwen2.5 ``tokenizer.json`` + ``tokenizer_config.json`` into ``directory``; return it.

    Cached: when the directory already holds files built from the same vocabulary by this builder
    version, nothing is rebuilt (the stamp file says so). Files appear atomically (written to a
    temporary name first), so an interrupted build leaves no half-written tokenizer behind.
    """
    directory = Path(directory)
    source = qwen_tiktoken_path()
    stamp = f"{_sha256(source)} {_BUILDER_VERSION}"
    stamp_path = directory / _STAMP
    if (
        not force
        and stamp_path.is_file()
        and stamp_path.read_text() == stamp
        and (directory / "tokenizer.json").is_file()
        and (directory / "tokenizer_config.json").is_file()
    ):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer_object(source)
    outputs = {
        "tokenizer.json": tok.to_str(pretty=False),
        "tokenizer_config.json": json.dumps(tokenizer_config(), indent=2),
        _STAMP: stamp,
    }
    for name, content in outputs.items():  # the stamp last: it vouches for the other two
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        with os.fdopen(fd, "w") as f:
            f.write(content)
        os.replace(tmp, directory / name)
    return directory


def cache_root() -> Path:
    """The project's cache directory: ``$MILEGPO_CACHE``, else ``$XDG_CACHE_HOME/milegpo_jax`` or
    ``~/.cache/milegpo_jax`` (built tokenizers, converted checkpoints)."""
    root = os.environ.get("MILEGPO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "milegpo_jax"
    )
    return Path(root)


def default_tokenizer_dir() -> Path:
    """Where the built Qwen2.5 tokenizer is cached by default (under ``cache_root()``)."""
    return cache_root() / "tokenizers" / "qwen2.5"


class TokenizerFilesError(FileNotFoundError):
    """A tokenizer directory that lacks a file the policy needs (one line naming the file)."""


# Vocabulary files by which transformers can build a tokenizer (the fast one, byte-level BPE, SentencePiece).
_VOCABULARY_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))
_CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def check_tokenizer_files(directory: Path) -> dict:
    """Refuses a directory without a vocabulary or without a chat template (every caller formats
    chats); returns the parsed ``tokenizer_config.json``."""
    if not any(all((directory / name).is_file() for name in names) for names in _VOCABULARY_FILES):
        partial = next((names for names in _VOCABULARY_FILES[1:] if (directory / names[0]).is_file()), _VOCABULARY_FILES[0])
        missing = next(name for name in partial if not (directory / name).is_file())
        raise TokenizerFilesError(f"{directory / missing}: missing (the directory holds no complete tokenizer)")
    config_file = directory / "tokenizer_config.json"
    if not config_file.is_file():
        raise TokenizerFilesError(f"{config_file}: missing")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise TokenizerFilesError(f"{config_file}: not a JSON file ({error})") from None
    if not isinstance(config, dict):
        raise TokenizerFilesError(f"{config_file}: not a JSON object")
    if not config.get("chat_template") and not any((directory / name).is_file() for name in _CHAT_TEMPLATE_FILES):
        raise TokenizerFilesError(f"{config_file}: no chat_template (nor a {_CHAT_TEMPLATE_FILES[0]} beside it)")
    return config


def load_tokenizer(directory: str | os.PathLike | None = None):
    """``transformers.AutoTokenizer`` from a local directory, never touching the network.

    ``None`` builds (or reuses) the Qwen2.5 tokenizer in ``default_tokenizer_dir()``. A directory
    without tokenizer files or chat template is a ``TokenizerFilesError`` naming the missing file.
    """
    from transformers import AutoTokenizer

    directory = build_qwen25_tokenizer(default_tokenizer_dir()) if directory is None else Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"tokenizer directory {directory} does not exist")
    declared = check_tokenizer_files(directory).get("tokenizer_class")
    if declared == "PreTrainedTokenizerFast":
        # A plain tokenizer.json (e.g. the word tokenizer of word_tokenizer.py). AutoTokenizer would let
        # a checkpoint's config.json (model_type "qwen2") pick Qwen's BPE class, which reads a word-level
        # vocabulary wrongly; the declared generic class takes tokenizer.json as it is.
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)
    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
