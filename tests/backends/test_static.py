"""The static embedder (backends/static.py): its table's build, the weighted mean, and the settings that load it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from palace_cli.backends import static
from palace_cli.backends.install import convert_bert_to_gguf
from palace_cli.errors import ConfigError, ModelError

from test_models import TINY_TEXTS, TINY_VOCAB, _reference_module, tiny_bert  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def tiny_gguf(tiny_bert, tmp_path_factory):  # noqa: F811
    """The tiny random BERT as an f32 GGUF (exact to the numpy forward)."""
    return convert_bert_to_gguf(tiny_bert, tmp_path_factory.mktemp("tiny-gguf") / "tiny.gguf", qtype="f32")


# --- the weighting and the mean, on tables made by hand -------------------------------

def test_zipf_weights_follow_sif_over_the_vocabulary_order():
    weights = static.zipf_weights(5, sif=0.1)
    p = (1 / np.arange(2, 7)) / (1 / np.arange(2, 7)).sum()
    assert np.allclose(weights, 0.1 / (0.1 + p))
    assert np.all(np.diff(weights) > 0)  # a later (rarer) piece weighs more
    assert np.all((weights > 0) & (weights < 1))


def test_finish_table_centres_then_weights_each_row():
    raw = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, 8.0]], dtype=np.float32)
    plain = static.finish_table(raw, sif=None, center=True)
    assert np.allclose(plain.mean(axis=0), 0)
    assert np.allclose(plain, raw - raw.mean(axis=0))
    weighted = static.finish_table(raw, sif=0.01, center=True)
    assert np.allclose(weighted, plain * static.zipf_weights(3, 0.01)[:, None])
    assert np.allclose(static.finish_table(raw, sif=None, center=False), raw)


def test_mean_rows_is_the_unit_length_mean_of_each_texts_rows():
    table = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 4]], dtype=np.float16)
    got = static.mean_rows(table, [[0], [0, 1], [0, 0, 2], []])
    assert got.dtype == np.float32
    assert np.allclose(got[0], [1, 0, 0])
    assert np.allclose(got[1], np.array([1, 2, 0]) / np.sqrt(5))
    assert np.allclose(got[2], np.array([2, 0, 4]) / np.sqrt(20))  # a repeated piece counts each time
    assert np.allclose(got[3], 0)  # no piece, no direction: StaticEmbedder gives such a text its frame
    # weighting a row scales its share of the mean: rows already weighted are simply summed
    weights = np.array([1.0, 3.0, 1.0], dtype=np.float32)
    weighted = static.mean_rows(table.astype(np.float32) * weights[:, None], [[0, 1]])[0]
    expected = (1 * table[0] + 3 * table[1]).astype(np.float32) / (1 + 3)
    assert np.allclose(weighted, expected / np.linalg.norm(expected))


# --- the build, on a tiny random BERT against an independent numpy forward ----------------

@pytest.mark.parametrize("frame", ["sep-cls", "cls-sep"])
def test_piece_rows_are_the_models_output_at_the_pieces_own_position(tiny_bert, tiny_gguf, frame):  # noqa: F811
    ref = _reference_module()
    config = json.loads((tiny_bert / "config.json").read_text())
    weights = ref.read_safetensors((tiny_bert / "model.safetensors").read_bytes())
    cls, sep = TINY_VOCAB.index("[CLS]"), TINY_VOCAB.index("[SEP]")
    first, last = (sep, cls) if frame == "sep-cls" else (cls, sep)
    rows = static.piece_rows(tiny_gguf, None, frame)
    assert rows.shape == (len(TINY_VOCAB), config["hidden_size"])
    for piece in range(len(TINY_VOCAB)):  # 168 pieces share a decode; here every piece is in the first one
        expected = ref.hidden_states([first, piece, last], weights, config)[1]
        cosine = rows[piece] @ expected / np.linalg.norm(rows[piece]) / np.linalg.norm(expected)
        assert cosine >= 0.9999 and np.allclose(rows[piece], expected, atol=0.01), TINY_VOCAB[piece]
    some = static.piece_rows(tiny_gguf, [9, 3, 9], frame)  # the other frames in a decode change only the rounding
    assert np.allclose(some, rows[[9, 3, 9]], atol=0.01) and np.allclose(some[0], some[2])


def test_a_saved_table_embeds_texts_as_the_weighted_mean_of_their_pieces(tiny_gguf, tmp_path):
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    table = static.build_table(tiny_gguf)
    assert np.allclose(table, static.finish_table(static.piece_rows(tiny_gguf)), atol=1e-6)
    path = tmp_path / "tiny.static.npy"
    manifest = static.save_table(table, path, tiny_gguf, frame="sep-cls")
    assert manifest["shape"] == list(table.shape) and manifest["frame"] == "sep-cls"
    assert json.loads(static.manifest_path(path).read_text())["table_sha256"] == manifest["table_sha256"]

    embedder = static.StaticEmbedder(path, tiny_gguf)
    assert embedder.dim == table.shape[1] and embedder.model_id.startswith("tiny.static@")
    full = LlamaCppEmbedder(tiny_gguf)
    got = embedder.embed_batch(TINY_TEXTS + [""])
    stored = np.load(path).astype(np.float32)  # float16 on disk
    for text, vector in zip(TINY_TEXTS, got):
        pieces = full.tokenize(text, cut=False)[1:-1]  # the model's own word pieces, without [CLS] and [SEP]
        assert embedder.pieces(text) == pieces
        mean = stored[pieces].sum(axis=0)
        assert np.allclose(vector, mean / np.linalg.norm(mean), atol=1e-5)
    frame = [TINY_VOCAB.index("[CLS]"), TINY_VOCAB.index("[SEP]")]
    assert np.allclose(got[-1], static.mean_rows(stored, [frame])[0], atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert embedder.usage == {"texts": len(TINY_TEXTS) + 1, "model_texts": 0, "model_tokens": 0}


def test_ensure_table_builds_once_and_again_when_the_model_changes(tiny_bert, tiny_gguf, tmp_path):  # noqa: F811
    model = tmp_path / "tiny.gguf"
    model.write_bytes(tiny_gguf.read_bytes())
    path = static.ensure_table(model)
    assert path == tmp_path / "tiny.static.npy" and static.model_of_table(path) == model
    stamp = path.stat().st_mtime_ns
    assert static.ensure_table(model) == path and path.stat().st_mtime_ns == stamp  # kept: same model bytes
    convert_bert_to_gguf(tiny_bert, model, qtype="f16")  # new bytes: the table is made again from them
    static.ensure_table(model)
    assert json.loads(static.manifest_path(path).read_text())["source_sha256"] != ""
    from palace_cli.backends import sha256_file

    assert json.loads(static.manifest_path(path).read_text())["source_sha256"] == sha256_file(model)
    with pytest.raises(ModelError, match="not a static table"):
        static.model_of_table(tmp_path / "tiny.npy")


# --- palace.toml settings ----------------------------------------------------------------

def test_embedder_settings_name_the_cut_and_the_static_table(tmp_path, monkeypatch):
    from palace_cli.backends import embedder_key, model_setting

    monkeypatch.setenv("PALACE_HOME", str(tmp_path))
    assert model_setting({"embedder": "static"}, "embedder").path is None  # nothing installed
    cut = model_setting({"embedder": "default:128"}, "embedder")
    assert (cut.kind, cut.cut, cut.describe(), cut.options()) == ("default", 128, "default:128", (("max_tokens", 128),))
    for bad in ("default:7", "default:513", "default:half"):
        with pytest.raises(ConfigError, match="cut after default"):
            model_setting({"embedder": bad}, "embedder")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert embedder_key(model) != embedder_key(model, cut=64)


def test_static_and_cut_settings_load_on_the_real_model(with_models, real_embedder):
    """The real all-MiniLM-L6-v2: "default:64" is the default cut shorter; "static" builds its table once (beside the
    model, in the shared test cache) and ranks a paraphrase above unrelated text."""
    from palace_cli.backends import load_model, model_setting

    short = load_model(model_setting({"embedder": "default:64"}, "embedder"))
    assert short.max_tokens == 64 and short.model_id == real_embedder.model_id.rsplit(":", 1)[0] + ":64"
    long_text = " ".join(["the cat sat on the mat and purred"] * 40)
    pieces = real_embedder.tokenize(long_text, cut=False)
    assert short.tokenize(long_text) == pieces[:63] + pieces[-1:]  # the cut keeps the closing [SEP]
    short.embed_batch([long_text, "a cat"])
    assert short.usage == {"texts": 2, "model_texts": 2, "model_tokens": 64 + 4}

    setting = model_setting({"embedder": "static"}, "embedder")
    embedder = load_model(setting)
    assert setting.path.is_file() and embedder.model_id.startswith(setting.path.stem + "@")
    a, b, c = embedder.embed_batch(["How do I reset my password?", "Steps to change a forgotten password",
                                    "The harvest festival starts in October"])
    assert float(a @ b) > float(a @ c) + 0.1
    assert load_model(setting) is embedder  # loaded once a process, like the GGUF embedders

