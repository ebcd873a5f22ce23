"""Atomic file writes: a file is either its old self or completely the new one, never half written.

Every writer goes through `write_bytes` / `write_text`: the data goes to a temporary file in the
same folder (same file system, so the rename is atomic; named ``.tmp-NAME.PID.XXXX`` after the
process writing it, see `decoders.records.folder.sweep_temps`), is flushed and fsynced, and only then
renamed over the destination. On any failure the temporary file is removed, the old file is
untouched, and a `DecodeError` names the path and the operating system's reason (e.g. "No space
left on device") with a fix.

`check_destination` checks, before any model time is spent, that a file can be written there.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.folder import TEMP_PREFIX, kill_point

_FIXES = {
    errno.ENOSPC: "free some disk space or write somewhere else",
    errno.EDQUOT: "free some space within your quota or write somewhere else",
    errno.EFBIG: "raise the file size limit (ulimit -f) or write elsewhere",  # RLIMIT_FSIZE: no free space lifts it
    errno.EACCES: "write to a folder you may write to",
    errno.EPERM: "write to a folder you may write to",
    errno.EROFS: "write to a folder on a writable file system",
    errno.ENOENT: "create the folder first or choose an existing one",
    errno.ENOTDIR: "choose a path inside an existing folder",
    errno.EISDIR: "give a file name, not a folder",
    errno.ENAMETOOLONG: "choose a shorter name",
}


def temp_prefix(name: str) -> str:
    """``.tmp-NAME.PID.``: a temporary file names the process writing it, so that the next start
    can remove it once that process is gone (`decoders.records.folder.sweep_temps`)."""
    return f"{TEMP_PREFIX}{name}.{os.getpid()}."


def reason(err: OSError) -> str:
    """The operating system's words for ``err`` ("No space left on device"), lower-cased first letter."""
    text = err.strerror or str(err) or type(err).__name__
    return text[:1].lower() + text[1:]


def shown_path(path: str | os.PathLike, most: int = 400) -> str:
    """``path`` for a message: whole if short, else its start and its length (never 5,000 characters)."""
    text = str(path)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def fix_for(err: OSError) -> str:
    return _FIXES.get(err.errno or 0, "check the path and try again")


class WriteError(DecodeError, OSError):
    """A write that failed and left the old file as it was: a `DecodeError` (one line for the user)
    that is also the `OSError` it came from (``errno``, ``strerror``), for callers that catch those."""

    def __init__(self, message: str, errno_: int | None = None, strerror: str | None = None):
        super().__init__(message)
        self.message = self.args[0]
        self.errno = errno_
        self.strerror = strerror

    def __str__(self) -> str:
        return self.message


def write_error(path: Path | str, err: OSError, what: str = "") -> WriteError:
    """One line: nothing was written to ``path``, why, and what to do."""
    noun = f"{what} " if what else ""
    return WriteError(f"nothing was written to {noun}{shown_path(path)}: {reason(err)}; {fix_for(err)}",
                      err.errno, err.strerror)


def write_bytes(path: str | os.PathLike, data: bytes, what: str = "", mode: int | None = None,
                exclusive: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically; DecodeError (old file untouched) on failure.

    ``what`` names the file in the error ("the run", "the report"); ``mode`` sets its permissions
    (default: those of the file it replaces, else 0o666 less the umask, as `open` would).
    ``exclusive``: never replace a file that is there, even one another process wrote a moment
    ago (a `WriteError` with errno EEXIST then): the new name is taken by a hard link.
    """
    shown = Path(path)
    try:
        path = Path(os.path.realpath(path))  # through symlinks: replace the file, keep the link
        folder = path.parent
        if path.is_dir():
            raise write_error(shown, OSError(errno.EISDIR, os.strerror(errno.EISDIR)), what)
        special = path.exists() and not path.is_file()
    except WriteError:
        raise
    except OSError as err:  # a name too long for the file system
        raise write_error(shown, err, what) from None
    if special:
        return _write_special(path, shown, data, what)
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(path.name), dir=folder)
        with os.fdopen(fd, "wb") as handle:
            _write_all(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, _mode_for(path, mode))
        kill_point(f"write:{path.name}")  # a test stops here: written, not yet renamed
        if exclusive:
            _link_new(tmp_name, path)
        else:
            os.replace(tmp_name, path)
        tmp_name = None
        _fsync_folder(folder)
    except OSError as err:
        raise write_error(shown, err, what) from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
    return shown


def _link_new(tmp_name: str, path: Path) -> None:
    """``tmp_name`` as ``path``, which must not exist (FileExistsError if it does): a hard link
    where the file system has them, else a name reserved with O_EXCL and then replaced."""
    try:
        os.link(tmp_name, path)
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(tmp_name, path)
        return
    os.unlink(tmp_name)


def _write_special(path: Path, shown: Path, data: bytes, what: str) -> Path:
    """A device, FIFO or socket (``/dev/stdout``, ``/dev/full``): written in place, since renaming a
    file over it would replace the device itself."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # a FIFO nothing reads: ENXIO, not a wait forever
    except OSError as err:
        if err.errno == errno.ENXIO:
            noun = f"{what} " if what else ""
            raise WriteError(f"nothing was written to {noun}{shown}: it is a FIFO (named pipe) that nothing reads; "
                             "start the reader first (e.g. `cat FIFO`) or write to a regular file",
                             err.errno, err.strerror) from None
        raise write_error(shown, err, what) from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as handle:
            _write_all(handle, data)
            handle.flush()
    except OSError as err:
        raise write_error(shown, err, what) from None
    return shown


def write_text(path: str | os.PathLike, text: str, what: str = "", mode: int | None = None,
               exclusive: bool = False) -> Path:
    """`write_bytes` of ``text`` encoded as UTF-8."""
    return write_bytes(path, text.encode("utf-8"), what=what, mode=mode, exclusive=exclusive)


def _write_all(handle, data: bytes) -> None:
    """Write in chunks (a full disk then fails part way, as it would in life)."""
    view = memoryview(data)
    chunk = 1 << 20
    for start in range(0, len(view), chunk):
        handle.write(view[start:start + chunk])


def _mode_for(path: Path, mode: int | None) -> int:
    if mode is not None:
        return mode
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable; not every file system allows opening a folder, so best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_destination(path: str | os.PathLike, flag: str = "", what: str = "") -> Path:
    """``path`` as a Path when a file can be written there; DecodeError saying why not, otherwise.

    Checks that the folder exists and is a folder, that the path is not a folder, and that the
    folder is writable (by creating and removing a temporary file, which also catches read-only
    file systems that `os.access` misses).
    """
    try:
        return _check_destination(Path(path), flag, what)
    except OSError as err:  # a name too long for the file system, a symlink loop
        given = f" (given to {flag})" if flag else ""
        noun = f"{what} " if what else ""
        raise DecodeError(f"cannot write {noun}to {shown_path(path)}{given}: {reason(err)}; {fix_for(err)}") from None


def _check_destination(path: Path, flag: str, what: str) -> Path:
    folder = Path(os.path.realpath(path)).parent if path.is_symlink() else path.parent
    given = f" (given to {flag})" if flag else ""
    noun = f"{what} " if what else ""
    if path.is_dir():
        raise DecodeError(f"cannot write {noun}to {path}{given}: it is a folder; give a file name such as "
                          f"{path / 'run.json'}")
    if path.exists() and not path.is_file():  # a device or FIFO (/dev/stdout): written in place
        if not os.access(path, os.W_OK):
            raise DecodeError(f"cannot write {noun}to {path}{given}: permission denied; choose another path")
        return path
    if not folder.exists():
        raise DecodeError(f"cannot write {noun}to {path}{given}: the folder {folder} does not exist; "
                          "create it first or choose an existing folder")
    if not folder.is_dir():
        raise DecodeError(f"cannot write {noun}to {path}{given}: {folder} is not a folder; "
                          "choose a path inside an existing folder")
    _probe_writable(folder, f"cannot write {noun}to {path}{given}")
    return path


def check_folder_destination(folder: str | os.PathLike, flag: str = "", what: str = "") -> Path:
    """``folder`` as a Path when files can be written into it (it may not exist yet: then its
    nearest existing parent must be a writable folder); DecodeError saying why not, otherwise."""
    try:
        return _check_folder_destination(Path(folder), flag, what)
    except OSError as err:  # a name too long for the file system, a symlink loop
        given = f" (given to {flag})" if flag else ""
        noun = f"{what} " if what else ""
        raise DecodeError(f"cannot write {noun}into {shown_path(folder)}{given}: {reason(err)}; "
                          f"{fix_for(err)}") from None


def _check_folder_destination(folder: Path, flag: str, what: str) -> Path:
    given = f" (given to {flag})" if flag else ""
    noun = f"{what} " if what else ""
    if folder.exists() and not folder.is_dir():
        raise DecodeError(f"cannot write {noun}into {folder}{given}: it is a file, not a folder; "
                          "give a folder (it is created if missing)")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise DecodeError(f"cannot write {noun}into {folder}{given}: {existing} is not a folder; "
                          "choose a path inside an existing folder")
    _probe_writable(existing, f"cannot write {noun}into {folder}{given}")
    return folder


def _probe_writable(folder: Path, failure: str) -> None:
    """Create and remove a file in ``folder``: the one sure test that a write there will work."""
    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix("probe"), dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise DecodeError(f"{failure}: {reason(err)}; {fix_for(err)}") from None
