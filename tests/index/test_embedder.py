"""The default embedding model on onnxruntime: its int8 rewrite, batching, and the fallback."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from mtl_mcp.errors import EmbeddingError
from mtl_mcp.index.embedder import MiniLMEmbedder, default_model_file, token_batches
from mtl_mcp.index.int8_graph import convert

TEXTS = [
    "Reproduce the failing test before touching the parser.",
    "Verify before claiming done: run the suite and read its output. " * 40,  # truncated
    "Respect the interface: callers rely on the return type of load_config().",
    "ünïcödé, 日本語 and emoji 🚀 survive tokenization",
    "x",
    "Inspect -> edit -> verify; then commit with a message that says why.",
]


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEmbedder:
    """The packaged graph as it is: a models dir that is a file cannot hold the rewrite."""
    blocked = tmp_path_factory.mktemp("blocked") / "models"
    blocked.write_text("not a directory")
    return MiniLMEmbedder(blocked)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEmbedder:
    return MiniLMEmbedder(tmp_path_factory.mktemp("models"))


def falls_back(models_dir: Path, caplog: pytest.LogCaptureFixture) -> str:
    """Embed with a new embedder on `models_dir`; it must run the packaged file. Its warnings."""
    caplog.clear()
    embedder = MiniLMEmbedder(models_dir)
    with caplog.at_level(logging.WARNING, logger="mtl_mcp.index.embedder"):
        embedder.embed_query(TEXTS[0])
    assert embedder.model_file == default_model_file()
    return caplog.text


def test_the_int8_rewrite_embeds_as_the_packaged_model_does(
    packaged: MiniLMEmbedder, rewritten: MiniLMEmbedder
) -> None:
    """Each text's vector from the rewrite is the packaged model's to cosine 0.999."""
    assert rewritten.model_file.name.startswith("all-MiniLM-L6-v2-int8w-")
    assert packaged.model_file == default_model_file()
    cosines = np.sum(rewritten.embed_documents(TEXTS) * packaged.embed_documents(TEXTS), axis=1)
    assert cosines.min() >= 0.999, cosines
    nearest = [
        int(np.argsort(-(e.embed_documents(TEXTS) @ e.embed_query("run the tests")))[0])
        for e in (packaged, rewritten)
    ]
    assert nearest[0] == nearest[1]


def test_a_text_in_a_batch_embeds_as_it_does_alone(rewritten: MiniLMEmbedder) -> None:
    """Padding to the batch's longest text changes nothing: the mask hides it. (The runtime
    quantizes activations with one scale per batch, in two passes: what is left of that
    moves a vector by less than 1e-6 in cosine.)"""
    batch = rewritten.embed_documents(TEXTS)
    alone = np.stack([rewritten.embed_query(text) for text in TEXTS])
    assert np.sum(batch * alone, axis=1).min() > 1 - 1e-6
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert rewritten.embed_documents([]).shape == (0, 384)


def test_token_batches_keep_every_text_once_and_within_budget() -> None:
    """Rows x longest row stay under the budget (a longer text goes alone), at most max_batch."""
    lengths = [5, 300, 40, 40, 41, 7, 256, 1, 90, 12] * 7
    batches = token_batches(lengths, token_budget=256, max_batch=8)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 8
        assert len(batch) == 1 or len(batch) * longest <= 256
        assert lengths[batch[0]] == longest  # the first row sets the width


def test_a_models_dir_that_cannot_hold_the_rewrite_falls_back_and_says_how_to_fix_it(
    packaged: MiniLMEmbedder, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """No rewrite is possible: the packaged file runs, and the warning names the directory."""
    blocked = tmp_path / "models"
    blocked.write_text("a file where the models directory should be")
    embedder = MiniLMEmbedder(blocked)
    with caplog.at_level(logging.WARNING, logger="mtl_mcp.index.embedder"):
        vector = embedder.embed_query(TEXTS[0])
    assert embedder.model_file == default_model_file()
    assert float(vector @ packaged.embed_query(TEXTS[0])) > 0.99999
    assert f"could not rewrite the embedding model to int8 in {blocked}" in caplog.text
    assert "make that directory writable" in caplog.text


def test_a_damaged_rewrite_is_replaced_by_the_packaged_file_and_made_again_next_time(
    rewritten: MiniLMEmbedder, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A truncated derived file is not fatal: this process runs the packaged file, the next
    one rewrites it again."""
    good = rewritten.model_file
    damaged = tmp_path / good.name
    damaged.write_bytes(good.read_bytes()[:4096])
    assert "the int8 rewrite of the embedding model cannot be used" in falls_back(tmp_path, caplog)
    assert not damaged.exists()
    again = MiniLMEmbedder(tmp_path)
    again.embed_query("x")
    assert again.model_file == damaged and damaged.read_bytes() == good.read_bytes()


def test_the_rewrite_refuses_a_graph_it_does_not_know(rewritten: MiniLMEmbedder) -> None:
    """Converting anything but the packaged MiniLM graph says what it found."""
    with pytest.raises(EmbeddingError, match="not the expected MiniLM graph"):
        convert(rewritten.model_file.read_bytes())


def test_a_rewrite_this_runtime_gets_wrong_is_remembered_and_not_made_again(
    rewritten: MiniLMEmbedder, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A rewrite that fails the probe (here: activations quantized in one pass, cosine ~0.99)
    is replaced by the packaged file, and later processes do not convert again."""
    derived = tmp_path / rewritten.model_file.name
    derived.write_bytes(convert(default_model_file().read_bytes(), passes=1))
    assert "does not reproduce the packaged model" in falls_back(tmp_path, caplog)
    assert not derived.exists()
    [marker] = tmp_path.glob("*.rejected-by-onnxruntime-*")
    assert "cosine" in marker.read_text()
    assert "this onnxruntime rejected its int8 rewrite" in falls_back(tmp_path, caplog)
    assert not derived.exists()  # not converted again
