"""Durable atomic file replacement that never destroys a version someone else wrote, and the fingerprints used for
optimistic concurrency.

Every mutation of an entry file goes through :func:`replace_file`: a hidden temp file in the same directory,
fsync of the file, then the temp is put in place, then fsync of the directory. A crash at any instant leaves the
old file or the new one, never a torn or missing one (or, without the exchange, the old one under a hidden name that
the next run's sweep puts back).

The agent writes without any lock (RockBot saves by temp file + rename, archives and restores by rewriting the file
in place: .NET opens it, then truncates and writes), so a check of the file followed by a rename over it loses any
write that lands in between. A guarded replacement therefore *swaps* the temp with the target (Linux
``renameat2(RENAME_EXCHANGE)``): whatever it displaces is still there, under the temp's name, and is compared with
the version the caller read. If it is not that version the agent won: its version is swapped back (see
:func:`_put_back`) and the write reports a conflict. The displaced version is held open by descriptor (``Held``)
until its name is gone and then read once more: a write the agent made through a descriptor it opened before the
swap lands there, and is put back in place as the newest version (issue 22). Filesystems without the exchange move
the entry aside, verify it, and link ours in only while the name is free (``_park_then_link``): a newer save of the
agent's is never replaced.

Names of our own files in an entry directory (never ``*.json``, which RockBot's index load would read):
``.{name}.{hex}.dk-new`` (a temp being written: only ever our data), ``.{name}.{inode}-{sha}.dk-swap`` (a temp
that is being swapped: our data exactly while its inode is the one in its name), ``.{name}.{hex}-{sha}.dk-aside``
(the entry moved aside by a write without the exchange), ``.{name}.{hex}.dk-conflict`` (a version of the agent's
we displaced and could not put back: kept, and reported by every sweep). What a killed write leaves is cleaned by
``leftovers.sweep``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import logging
import os
import secrets
import stat
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dreamkeeper.memory.errors import ConflictError, StoreWriteError
from dreamkeeper.memory.exchange import can_exchange, exchange
from dreamkeeper.memory.files import MiB, UnsafeFileError, open_regular, read_fd

log = logging.getLogger(__name__)

ENTRY_FILE_LIMIT: Final = 8 * MiB
"""The largest entry file read (RockBot's entries are a few KB). A larger one is reported malformed, untouched."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the caller last read: content hash plus mtime and size. Any difference means someone wrote."""

    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of_bytes(cls, data: bytes, st: os.stat_result) -> Fingerprint:
        return cls(hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns)

    def short(self) -> str:
        return self.sha256[:12]

    def same_stat(self, st: os.stat_result) -> bool:
        return (self.size, self.mtime_ns) == (st.st_size, st.st_mtime_ns)


class _Unchecked:
    """Marker: write without a concurrency check (dreamkeeper's own state files only)."""


UNCHECKED: Final = _Unchecked()
MUST_NOT_EXIST: Final = None

NEW_SUFFIX: Final = ".dk-new"
SWAP_SUFFIX: Final = ".dk-swap"
ASIDE_SUFFIX: Final = ".dk-aside"
CONFLICT_SUFFIX: Final = ".dk-conflict"

_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.EPERM, errno.EFBIG}

# ---- the test seam -----------------------------------------------------------------------------------------------

WriteSeam = Callable[[str, Path], None]
_seam: WriteSeam | None = None


@contextlib.contextmanager
def write_seam(hook: WriteSeam) -> Iterator[None]:
    """Tests only: call ``hook(stage, target)`` at the instants another writer could interleave with ours.

    Stages: ``"checked"`` (after the cheap pre-check, before the file is put in place: where check-then-rename
    lost writes), ``"swapped"`` (after the swap, before the displaced version is verified), ``"put-back"``
    (before each swap back). The hook may sleep (a throttled pod) or write as the agent does."""
    global _seam
    previous, _seam = _seam, hook
    try:
        yield
    finally:
        _seam = previous


def _at(stage: str, path: Path) -> None:
    if _seam is not None:
        _seam(stage, path)


# ---- reading -----------------------------------------------------------------------------------------------------


def read_with_fingerprint(path: Path | str, limit: int = ENTRY_FILE_LIMIT) -> tuple[bytes, Fingerprint]:
    """An entry file's bytes and fingerprint. Refuses (UnsafeFileError) a symlink, a special file or one over
    ``limit`` bytes without reading it."""
    data, fingerprint, _ = read_with_stat(path, limit)
    return data, fingerprint


def read_with_stat(path: Path | str, limit: int = ENTRY_FILE_LIMIT) -> tuple[bytes, Fingerprint, os.stat_result]:
    """``read_with_fingerprint`` with the ``fstat`` taken after the read (the corpus index keeps it)."""
    fd, st = open_regular(path, limit, follow_symlinks=False)
    try:
        data = read_fd(fd, path, limit, st.st_size)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return data, Fingerprint.of_bytes(data, st), st


def current_fingerprint(path: Path) -> Fingerprint | None:
    try:
        return read_with_fingerprint(path)[1]
    except FileNotFoundError:
        return None


def fingerprint_or_none(path: Path | str) -> Fingerprint | None:
    """What is at ``path`` now; None when it cannot be read as a regular file (it is then not anyone's we expect)."""
    try:
        return read_with_fingerprint(path, limit=sys.maxsize)[1]
    except (OSError, UnsafeFileError):
        return None


def check_unchanged(path: Path, expected: Fingerprint | None) -> None:
    """Refuse when the file is not what the caller read (expected=None means: must not exist)."""
    actual = current_fingerprint(path)
    if expected is None:
        if actual is not None:
            raise ConflictError(path, "a file appeared where a new entry was to be created")
        return
    if actual is None:
        raise ConflictError(path, "the file was removed since it was read")
    if actual.sha256 != expected.sha256:
        raise ConflictError(path, f"content changed since it was read ({expected.short()} -> {actual.short()})")
    if actual.size != expected.size or actual.mtime_ns != expected.mtime_ns:
        raise ConflictError(path, "the file was rewritten since it was read")


def _precheck(path: Path, expected: Fingerprint) -> os.stat_result:
    """The cheap refusal before any write: the file's size and mtime still those read (the swap verifies content)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ConflictError(path, "the file was removed since it was read") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConflictError(path, "the file was replaced by something that is not a regular file")
    if not expected.same_stat(st):
        raise ConflictError(path, "the file was rewritten since it was read")
    return st


# ---- directories ----------------------------------------------------------------------------------------------


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durably(directory: Path) -> None:
    """mkdir -p that also fsyncs each parent it added a directory to, so a new category survives a crash."""
    missing: list[Path] = []
    probe = directory
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            created.mkdir()
        fsync_directory(created.parent)


# ---- writing ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Temp:
    """A temp file of ours: its current name, its inode (what makes it ours) and the fingerprint of its data. The
    name is a string: every write makes two (the temp, then its armed name), and a ``Path`` for each, parsed and
    formatted again for each system call, cost a guarded write more than its rename (issue 27)."""

    path: str
    inode: int
    fingerprint: Fingerprint


_temp_prefix = secrets.token_hex(8)
_temp_serial = itertools.count()


def _reseed_temp_names() -> None:
    global _temp_prefix, _temp_serial
    _temp_prefix, _temp_serial = secrets.token_hex(8), itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_temp_names)  # a forked child never counts on from its parent's names


def _temp_name(path: Path | str) -> str:
    """A temp file's name beside ``path``: 32 hex digits as a uuid4 gives, from a per-process random prefix and a
    counter (a uuid4 a file asked the kernel for 16 random bytes each time). Unique enough never to meet another
    temp; and a name that does exist is never clobbered: temps are created with O_EXCL."""
    return f".{os.path.basename(path)}.{_temp_prefix}{next(_temp_serial):016x}{NEW_SUFFIX}"


def _write_temp(path: Path, data: bytes, old: os.stat_result | None = None) -> _Temp:
    """Our data in a new temp file beside ``path``, fsynced. ``old``: ``path``'s lstat just taken by the caller (the
    guarded write's pre-check), whose mode and group the temp gets; otherwise ``path`` is looked at here."""
    target = os.fspath(path)
    temp = os.path.join(os.path.dirname(target), _temp_name(target))  # as ``path.parent / name``
    # A new file gets what the umask leaves of 0666: 0644 by default, group-writable under --shared-group.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        st = os.fstat(fd)
        if old is None:
            with contextlib.suppress(FileNotFoundError):
                old = os.lstat(path)
        if old is not None and stat.S_ISREG(old.st_mode):
            # Keep the agent's file mode (and group, on fsGroup-shared volumes) across rewrites; of the file itself:
            # a symlink in its place is replaced, never followed. Only when they differ from what the new file got
            # (the common case is that they do not: two system calls a file saved).
            changed = False
            if stat.S_IMODE(old.st_mode) != stat.S_IMODE(st.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                changed = True
            if old.st_gid != st.st_gid:
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, -1, old.st_gid)
                changed = True
            if changed:
                st = os.fstat(fd)
        os.fsync(fd)
        # A rename or swap keeps the inode, so this is the fingerprint the target will have — taken from our own
        # fd, not by re-reading the target, which the agent may already have rewritten. (A mode or owner change
        # leaves size and mtime as they were: the fstat before the fsync is the file's.)
        fingerprint = Fingerprint.of_bytes(data, st)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)  # just created by us (O_EXCL), holding nothing but our partial data
        raise
    os.close(fd)
    return _Temp(temp, st.st_ino, fingerprint)


def discard_own(temp: Path | str, inode: int) -> None:
    """Remove ``temp`` if it is still our own file (its inode): after a swap the name may hold another version."""
    with contextlib.suppress(OSError):
        if os.lstat(temp).st_ino == inode:
            os.unlink(temp)


def _arm(temp: _Temp, expected: Fingerprint) -> _Temp:
    """Rename a written temp to the name that records its inode and the version it is to replace, before it is
    swapped. Whenever the process dies, ``sweep`` can then tell what the name holds: our data (its inode), the
    version we meant to replace (its hash: the swap was done), or someone else's version (kept)."""
    directory, name = os.path.split(temp.path)
    stem = name.removesuffix(NEW_SUFFIX).rsplit(".", 1)[0]
    armed = os.path.join(directory, f"{stem}.{temp.inode}-{expected.sha256[:SHA_IN_NAME]}{SWAP_SUFFIX}")
    os.rename(temp.path, armed)
    return _Temp(armed, temp.inode, temp.fingerprint)


SHA_IN_NAME: Final = 32


def replace_file(
    path: Path, data: bytes, expected: Fingerprint | _Unchecked | None, *, sync_directory: bool = True
) -> Fingerprint:
    """Durably replace (or create) ``path`` with ``data``.

    ``expected``: a Fingerprint = the file must still be exactly that (a write that finds another version in
    place puts that version back and raises ConflictError); ``MUST_NOT_EXIST`` (None) = exclusive create, never
    clobbering a file that appeared; ``UNCHECKED`` = dreamkeeper's own state files only.
    ``sync_directory=False`` leaves the fsync of the directory (which makes the rename itself durable) to the
    caller, who batches it over many files; the file's own data is always fsynced before the rename, so a crash
    still leaves the old file or the new one, whole.
    """
    temp: _Temp | None = None
    try:
        if isinstance(expected, Fingerprint):
            st = _precheck(path, expected)
            temp = _write_temp(path, data, st)
            temp = _arm(temp, expected)
            _swap_in(temp, path, expected, st.st_dev)
        else:
            make_dirs_durably(path.parent)
            temp = _write_temp(path, data)
            if expected is None:
                _create(temp, path)
            else:
                os.replace(temp.path, path)
        fingerprint, temp = temp.fingerprint, None
        if sync_directory:
            fsync_directory(path.parent)
    except OSError as exc:
        if temp is not None:
            discard_own(temp.path, temp.inode)
        if exc.errno in _WRITE_ERRNOS and not isinstance(exc, UnsafeFileError):
            raise StoreWriteError(path, exc) from exc
        raise
    except BaseException:
        if temp is not None:
            discard_own(temp.path, temp.inode)
        raise
    return fingerprint


def _create(temp: _Temp, path: Path) -> None:
    # link() fails if the name exists: a concurrent creator is never overwritten.
    try:
        os.link(temp.path, path)
    except FileExistsError as exc:
        raise ConflictError(path, "a file appeared where a new entry was to be created") from exc
    except OSError as exc:
        if exc.errno not in _NO_HARDLINKS:
            raise
        # Volumes without hard links (some SMB/CSI drivers): check then rename; the race window is tiny.
        check_unchanged(path, None)
        os.replace(temp.path, path)
    else:
        # A leftover would be a hidden temp, which scans ignore and the next sweep removes; the entry is in place.
        discard_own(temp.path, temp.inode)


def _swap_in(temp: _Temp, path: Path, expected: Fingerprint, device: int) -> None:
    """Put ``temp`` (our data) at ``path`` if ``path`` still holds ``expected``; never destroy another version."""
    if not can_exchange(device):
        _park_then_link(temp, path, expected)
        return
    _at("checked", path)
    try:
        swapped = exchange(temp.path, path, device)
    except FileNotFoundError:
        raise ConflictError(path, "the file was removed since it was read") from None
    if not swapped:  # the filesystem refused the exchange just now
        _park_then_link(temp, path, expected)
        return
    _at("swapped", path)
    held = Held.open(temp.path)
    try:
        if held is not None and held.fingerprint == expected:
            replaced(temp.path)
            _at("replaced", path)
            late = held.changed()
            if late is None:
                return
            _late_write(late, temp, path, device)
        kept = _put_back(temp, path, device)
    finally:
        if held is not None:
            held.close()
    with contextlib.suppress(OSError):
        fsync_directory(path.parent)  # the agent's version back in place survives a crash
    where = f"; an older version of the agent's is kept at {kept}" if kept else ""
    raise ConflictError(path, f"the agent wrote it meanwhile; its version was put back in place{where}")


class Held:
    """A version of an entry this write displaces, held open by descriptor from the moment it is verified.

    The agent rewrites files in place (.NET's ``File.WriteAllText``: open, lock, *then* truncate and write). A
    descriptor it opened before our swap still reaches the displaced version after its name is gone: its write
    then lands in a file nobody can see any more (issue 22). Only a descriptor of ours on the same file can tell:
    ``changed`` reads it again after the name is gone."""

    def __init__(self, fd: int, fingerprint: Fingerprint) -> None:
        self.fd = fd
        self.fingerprint = fingerprint

    @classmethod
    def open(cls, path: Path | str) -> Held | None:
        """The file at ``path``, held; None when it is not a regular file (then it is no one's version we expect)."""
        try:
            fd, st = open_regular(path, sys.maxsize, follow_symlinks=False)
        except (OSError, UnsafeFileError):
            return None
        try:
            data = read_fd(fd, path, sys.maxsize, st.st_size)
            return cls(fd, Fingerprint.of_bytes(data, os.fstat(fd)))
        except BaseException:
            os.close(fd)
            raise

    def changed(self) -> bytes | None:
        """What the file holds now, when it is not what was verified (someone wrote through a descriptor)."""
        st = os.fstat(self.fd)
        data = os.pread(self.fd, max(st.st_size, 0), 0)
        return None if Fingerprint.of_bytes(data, st) == self.fingerprint else data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _late_write(data: bytes, ours: _Temp, path: Path, device: int) -> None:
    """The agent wrote into the version we displaced after we verified it (its descriptor predates our swap): that
    write is the newest version of the entry. It goes back in place, and ours (bookkeeping a later cycle redoes)
    goes; if the agent wrote the entry yet again meanwhile, that newer file stays and this one is kept as a
    conflict copy. Raises ConflictError: our write did not stand."""
    written = _write_temp(path, data)
    # Named as a conflict copy at once: if anything below fails, the agent's version is kept and reported, never
    # taken for a temp of ours.
    late = _Temp(str(conflict_path(path)), written.inode, written.fingerprint)
    os.rename(written.path, late.path)
    log.warning("the agent wrote %s in place through a descriptor held across our write; putting it back", path)
    if can_exchange(device):
        kept = _put_back(_Temp(late.path, ours.inode, ours.fingerprint), path, device)
    else:
        kept = _late_without_exchange(late, ours, path)
    with contextlib.suppress(OSError):
        fsync_directory(path.parent)
    where = f"; an older version of the agent's is kept at {kept}" if kept else ""
    raise ConflictError(path, f"the agent wrote it in place during our write; its version was put back{where}")


def _park_then_link(temp: _Temp, path: Path, expected: Fingerprint) -> None:
    """Where there is no exchange (NFS and others): move the file out of the agent's namespace, verify what was
    moved, then link ours in only while the name is free. Check-then-rename replaced a newer save of the agent's
    with an older version when it landed between the check and the rename (issue 22); here a file the agent
    writes meanwhile takes the name first and ours is never placed over it."""
    _at("checked", path)
    aside = path.with_name(aside_name(path, expected))
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        raise ConflictError(path, "the file was removed since it was read") from None
    held = Held.open(aside)
    try:
        if held is None or held.fingerprint != expected:
            kept = _unpark(aside, path)
            where = f"; an older version of the agent's is kept at {kept}" if kept else ""
            raise ConflictError(path, f"the agent wrote it meanwhile; its version was put back in place{where}")
        _at("parked", path)
        if not _link_in(temp, path):
            # The agent saved a newer version meanwhile (temp + rename, or an open that created the file): it stays.
            # The version we moved aside is the one we read, which that save replaced: it goes, unless the agent
            # wrote into it as well (then it is kept).
            _drop_aside(aside, held, path)
            raise ConflictError(path, "the agent saved a newer version meanwhile; it was kept")
        replaced(aside)
        _at("replaced", path)
        late = held.changed()
        if late is not None:
            _late_write(late, temp, path, path.lstat().st_dev)
    finally:
        if held is not None:
            held.close()


def aside_name(path: Path, replacing: Fingerprint) -> str:
    """``.{name}.{hex}-{sha}.dk-aside``: the sweep tells from the hash whether it holds the version being replaced."""
    return f".{path.name}.{uuid.uuid4().hex[:12]}-{replacing.sha256[:SHA_IN_NAME]}{ASIDE_SUFFIX}"


def _link_in(temp: _Temp, path: Path) -> bool:
    """Give ``path`` our temp's file, only if the name is free; False when something took it first."""
    try:
        os.link(temp.path, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARDLINKS:
            raise
        # No hard links (some SMB/CSI drivers): the name was free a moment ago; the window is one rename.
        if os.path.lexists(path):
            return False
        os.replace(temp.path, path)
        return True
    discard_own(temp.path, temp.inode)  # its second name; the data is in place
    return True


def _unpark(aside: Path, path: Path) -> Path | None:
    """Put a version moved aside back under its name; when the name is taken (the agent wrote again) it is kept as
    a conflict copy, older than the file in place. Returns the copy, if one was kept."""
    try:
        os.link(aside, path)
    except FileExistsError:
        return keep_conflict_copy(aside, path)
    os.unlink(aside)  # only the extra name: the version is back under its own
    return None


def _drop_aside(aside: Path, held: Held, path: Path) -> None:
    if held.changed() is None:
        replaced(aside)
    else:
        keep_conflict_copy(aside, path)


def _late_without_exchange(late: _Temp, ours: _Temp, path: Path) -> Path | None:
    """``_late_write`` where there is no exchange: our file moved aside and checked to be ours (by inode), then the
    agent's late version linked in while the name is free."""
    aside = path.with_name(aside_name(path, ours.fingerprint))
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return keep_conflict_copy(late.path, path)  # the agent removed the entry since
    if os.lstat(aside).st_ino != ours.inode:
        kept = keep_conflict_copy(late.path, path)  # the agent wrote by name again: its newer file goes back
        _unpark(aside, path)
        return kept
    if not _link_in(late, path):
        kept = keep_conflict_copy(late.path, path)
        discard_own(aside, ours.inode)
        return kept
    discard_own(aside, ours.inode)
    return None


def replaced(displaced: Path | str) -> None:
    """The swap displaced exactly the version the caller read and meant to replace: that version goes."""
    os.unlink(displaced)


def _put_back(temp: _Temp, path: Path, device: int, attempts: int = 16) -> Path | None:
    """Undo a swap that displaced someone else's version (at ``temp``); returns where a version that could not
    go back in place is kept, if any.

    Each swap back puts the displaced version at ``path`` and takes what is there now. That is our own data,
    to be thrown away, unless the agent wrote yet again in between: then the agent's newer file is swapped back
    in place, and the older one it displaces is kept as a conflict copy. Nothing but our own data is deleted."""
    ours = temp.fingerprint
    expect: Fingerprint | None = ours  # what we hope the next swap takes out of `path`
    holding = fingerprint_or_none(temp.path)  # what the next swap puts at `path`
    for _ in range(attempts):
        _at("put-back", path)
        try:
            swapped = exchange(temp.path, path, device)
        except FileNotFoundError:
            # The agent removed `path` meanwhile (a delete or re-categorise): its displaced version stays kept.
            return keep_conflict_copy(temp.path, path)
        if not swapped:
            return keep_conflict_copy(temp.path, path)
        taken = fingerprint_or_none(temp.path)
        if taken == expect:
            if taken == ours and os.lstat(temp.path).st_ino == temp.inode:
                discard_own(temp.path, temp.inode)
                return None
            return keep_conflict_copy(temp.path, path)
        expect, holding = holding, taken
    return keep_conflict_copy(temp.path, path)


def conflict_path(path: Path) -> Path:
    """``.{name}.{hex}.dk-conflict`` beside ``path``: a displaced version of the agent's, kept."""
    return path.parent / f".{path.name}.{uuid.uuid4().hex}{CONFLICT_SUFFIX}"


def keep_conflict_copy(temp: Path | str, path: Path) -> Path:
    copy = conflict_path(path)
    os.rename(temp, copy)
    log.warning("kept a displaced version of %s at %s (the agent wrote it while we did)", path, copy)
    return copy


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` only if it does not exist; never renames over an existing file.

    Returns True when created, False when a file was already there (left byte-identical).
    """
    try:
        replace_file(path, data, MUST_NOT_EXIST)
    except ConflictError:
        return False
    return True


def unlink_durably(path: Path) -> None:
    """Remove a file and persist the directory change. Only purge may call this on an entry file."""
    os.unlink(path)
    fsync_directory(path.parent)
