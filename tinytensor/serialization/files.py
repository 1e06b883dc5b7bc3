"""Reading and writing checkpoint files without trusting them.

Three guards sit here, shared by `tt.load` and `models.from_pretrained`:

- `read_file` reads regular files only. It looks before it opens (os.stat): a FIFO would block
  `open` forever and a device file could have side effects on open, so neither is ever opened.
- `parse_json` caps the size and nesting depth of JSON (config.json, shard indexes, our own
  object descriptions) and refuses duplicate keys, which `json.loads` would silently resolve to
  the last one.
- `atomic_write` writes through a temp file and `os.replace`, and removes the temp files that
  earlier saves killed mid-write (kill -9, power loss) left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat

import numpy as np


class CheckpointError(OSError):
    """A checkpoint file or folder that cannot be trusted: missing, truncated, corrupt, hostile.

    The message names the file and what is wrong with it. An OSError, as transformers' own
    loading errors are, so `except OSError` around file loading catches it.
    """


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No file at the given path (both a CheckpointError and a FileNotFoundError)."""


def fspath(path, where: str) -> str:
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{where}: expected a file path (str or os.PathLike) or a binary file object, "
            f"got {type(path).__name__}"
        ) from None


def describe_file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_file(source, where: str, max_bytes: int | None = None) -> tuple[str, bytes]:
    """(a name for messages, the whole content) of a path to a regular file or a file object.

    Raises:
        CheckpointNotFoundError: nothing at the path.
        CheckpointError: not a regular file, unreadable, or larger than `max_bytes`.
    """
    if hasattr(source, "read"):
        name = file_object_name(source)
        data = source.read() if max_bytes is None else source.read(max_bytes + 1)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"{where}: the file object {name} returned {type(data).__name__}, not bytes; "
                "open the file in binary mode ('rb')"
            )
        data = bytes(data)
        if max_bytes is not None and len(data) > max_bytes:
            raise CheckpointError(f"{where}: cannot read {name}: it has over {max_bytes} bytes")
        return name, data
    with open_regular_file(source, where) as (f, path):
        size = os.fstat(f.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise CheckpointError(
                f"{where}: cannot read {path}: it has {size} bytes, more than the "
                f"{max_bytes}-byte limit for this kind of file"
            )
        try:
            return path, f.read()
        except OSError as e:
            raise CheckpointError(f"{where}: cannot read {path}: {e.strerror}") from None


def file_object_name(f) -> str:
    return repr(getattr(f, "name", None) or f"<{type(f).__name__}>")


@contextlib.contextmanager
def open_regular_file(source, where: str):
    """Opens a path for binary reading as (file object, path) if it is a regular file.

    Raises:
        CheckpointNotFoundError: nothing at the path.
        CheckpointError: a FIFO, device, socket or directory; unreadable.
    """
    path = fspath(source, where)
    try:
        # NOTE: stat before open: opening a FIFO blocks until a writer appears (a hang), and
        # opening some devices acts on them. os.stat follows symlinks, as open does.
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CheckpointNotFoundError(f"{where}: no such file: {path}") from None
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read {path}: {e.strerror}") from None
    except ValueError as e:  # a NUL byte in the path
        raise CheckpointError(f"{where}: cannot read {path!r}: {e}") from None
    if not stat.S_ISREG(mode):
        raise CheckpointError(
            f"{where}: cannot read {path}: it is {describe_file_kind(mode)}, not a regular file"
        )
    try:
        # O_NONBLOCK: should the path be swapped for a FIFO between stat and open, open
        # returns at once instead of hanging; fstat below then refuses it.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot open {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"{where}: cannot read {path}: it is {describe_file_kind(mode)}")
        yield f, path


def same_file_path(f, path: str) -> str:
    """A path that opens the very file `f` has open, even if `path` was since replaced.

    Linux exposes open files as /proc/self/fd/N; elsewhere the path itself is the best we have.
    """
    proc = f"/proc/self/fd/{f.fileno()}"
    return proc if os.path.exists(proc) else path


# ---- JSON ----------------------------------------------------------------------------------------

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a string, escapes included


def json_depth(text: bytes) -> int:
    """How deeply arrays and objects nest in JSON `text` (0 for a scalar), without parsing it."""
    structure = np.frombuffer(_JSON_STRING.sub(b"", text), dtype=np.uint8)
    steps = np.isin(structure, (ord("["), ord("{"))).astype(np.int64)
    steps -= np.isin(structure, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"the key {key!r} appears twice in one object")
        obj[key] = value
    return obj


def parse_json(text, what: str, max_depth: int):
    """JSON `text` (bytes or str) parsed strictly: valid UTF-8, depth <= max_depth, no
    duplicate keys, no NaN/Infinity literals (not JSON). Errors name `what` (the file)."""
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    depth = json_depth(raw)
    if depth > max_depth:
        raise CheckpointError(
            f"{what} nests JSON {depth} levels deep, more than the {max_depth} allowed"
        )
    try:
        return json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_refuse_constant,
        )
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{what} is not valid UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{what} is not valid JSON ({e})") from None
    except ValueError as e:
        raise CheckpointError(f"{what} is not valid JSON: {e}") from None


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON value")


# ---- atomic writes -------------------------------------------------------------------------------


def _temp_name(base: str) -> str:
    # The pid lets a later save tell an abandoned temp file (its writer is dead) from one
    # that a concurrent save is still writing.
    return f".{base}.{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _temp_writer_pid(name: str, base: str) -> int | None:
    prefix = f".{base}."
    if not (name.startswith(prefix) and name.endswith(".tmp")):
        return None
    pid, dash, token = name[len(prefix) : -len(".tmp")].partition("-")
    return int(pid) if pid.isdigit() and dash and len(token) == 8 else None


def _is_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0 sends nothing: it only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists but belongs to someone else
        return True
    return True


def remove_abandoned_temp_files(path: str) -> list[str]:
    """Deletes the temp files that saves of `path` left when killed mid-write; returns them.

    POSIX only: on Windows os.kill would terminate the process it asks about, so there the
    leftovers stay (they are hidden dot-files next to the checkpoint).
    """
    if os.name != "posix":
        return []
    directory, base = os.path.split(os.path.abspath(path))
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            pid = _temp_writer_pid(name, base)
            if pid is not None and not _is_alive(pid):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))
                    removed.append(name)
    return removed


def atomic_write(path: str, write, where: str) -> None:
    """Runs write(f) into a temp file next to `path`, makes it durable, then renames it over.

    os.replace is atomic on POSIX and Windows: readers see the old file or the new one, never a
    mix. If write fails the temp file is removed; if the process is killed (nothing runs), the
    temp file stays until the next save of the same path removes it.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"{where}: cannot write {path}: directory {directory} does not exist"
        )
    remove_abandoned_temp_files(path)
    tmp = os.path.join(directory, _temp_name(os.path.basename(path)))
    # os.open with 0o666 lets the umask decide the permissions, as for a plain open().
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # The rename itself is durable only once the directory entry is flushed (POSIX only).
    with contextlib.suppress(OSError, AttributeError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
