"""Reading and writing client config files: never a half-written file, always a backup."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from mtl_mcp.errors import ConfigError


def read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}; check it is a readable file"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text; fix or move it, then retry") from exc


def backup_copy(path: Path, stamp: str) -> Path:
    backup = path.with_name(f"{path.name}.mtl-mcp-backup-{stamp}")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.mtl-mcp-backup-{stamp}-{n}")
    write_atomic(backup, path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return backup


def write_atomic(path: Path, content: str | bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.with_name(f".{path.name}.mtl-mcp-tmp-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
