"""Files the Python side reads and writes.

Reading: only a regular file, no larger than a stated limit, is read; a FIFO, a
device (``/dev/zero``), a directory or a file over the limit is refused with one
FileError naming the file, before any byte is read. The file is opened without
blocking and checked on the open descriptor, so a FIFO put in its place after a
check cannot hang the reader.

Writing: a file is written to a temporary file in the same folder, flushed to
disk and renamed over the target, so a reader sees the old file or the new one,
never a part; when writing fails the temporary file is removed and the old file is
left as it was.
"""

import contextlib
import os
import stat
import tempfile

from .errors import FileError


def _describe(mode):
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path, limit, what="file", hint=""):
    """A binary file object of `path`, which must be a regular file of at most
    `limit` bytes; `what` names the file in errors ("tuning cache"), `hint` says
    how to raise the limit."""
    path = os.fspath(path)
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FileError(f"{what} '{name}': {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileError(f"{what} '{name}': {_describe(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise FileError(f"{what} '{name}': {info.st_size} bytes, above the limit of {limit}{hint}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path, limit, what="file", hint=""):
    """The bytes of `path` (see open_regular); a file that grew past `limit` while
    it was read is refused too."""
    with open_regular(path, limit, what, hint) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise FileError(f"{what} '{os.fsdecode(path)}': {e.strerror}") from None
    if len(data) > limit:
        raise FileError(f"{what} '{os.fsdecode(path)}': above the limit of {limit} bytes{hint}")
    return data


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path in `path`'s folder for the caller to write; when the
    block ends normally, that file is flushed to disk and renamed to `path`; when it
    raises, the temporary file is removed and `path` is left as it was. The suffix of
    `path` is kept (writers such as np.save and savefig read it)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    suffix = os.path.splitext(base)[1]
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp" + suffix, dir=folder)
    except OSError as e:
        raise FileError(f"{os.fsdecode(path)}: cannot write: {e.strerror}") from None
    os.close(fd)
    try:
        yield temp
        with open(temp, "rb+") as f:
            os.fsync(f.fileno())
        _keep_mode(path, temp)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_folder(folder)


def write_atomically(path, write, mode="wb", encoding=None):
    """Writes `path` through `write(file)`, a callback given the open temporary file
    (`mode` "wb" or "w"), atomically as atomic_path says."""
    with atomic_path(path) as temp:
        with open(temp, mode, encoding=encoding) as f:
            write(f)


def write_bytes(path, data):
    write_atomically(path, lambda f: f.write(data))


def write_text(path, text):
    write_atomically(path, lambda f: f.write(text), mode="w", encoding="utf-8")


def _keep_mode(path, temp):
    """The new file gets the old one's permissions, or the umask's default (mkstemp makes 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temp, mode)


def _sync_folder(folder):
    """Flushes the rename to disk where the platform allows it."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
