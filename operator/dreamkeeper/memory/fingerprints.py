"""Content fingerprints for review stamps and cluster identities, RockBot-compatible.

The one definition: store statistics, gating, validation, the proposers and the demo sample all stamp or compare
with these (a stamp written by one and checked by another must agree byte for byte).

RockBot hashes ``Encoding.UTF8.GetBytes`` of a .NET string (DreamService.cs ``ContentFingerprint`` and
``ClusterHash``, MarimerLLC/rockbot@05346ff0). A .NET string is UTF-16: a valid surrogate pair is one character and a
lone surrogate becomes U+FFFD (EF BF BD), never an exception. Text read from JSON can hold a lone surrogate
(``"\\uD83D"``), so the bytes are made the way .NET makes them instead of raising ``UnicodeEncodeError``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# .NET's ``\s`` (and what ``string.Trim()`` strips): \t-\r, U+0085 and the Unicode separators (Zs, Zl, Zp). Python's
# own whitespace adds U+001C-U+001F, which .NET leaves inside a word (``dotnet_collapse`` takes them the long way).
_DOTNET_SPACE = re.compile("[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def dotnet_utf8(text: str) -> bytes:
    """``Encoding.UTF8.GetBytes(text)``: UTF-8, lone surrogates replaced by U+FFFD, surrogate pairs joined."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16 code units, as .NET holds the string: pairs decode to one code point, a lone half to U+FFFD.
        units = text.encode("utf-16-le", "surrogatepass")
        return units.decode("utf-16-le", "replace").encode("utf-8")


def ordinal_key(text: str) -> bytes:
    """Sort key of ``StringComparer.Ordinal``: UTF-16 code units (big-endian bytes compare in code-unit order)."""
    return text.encode("utf-16-be", "surrogatepass")


def review_hash(content: str) -> str:
    """SHA-256 of the UTF-8 content, first 8 bytes as 16 uppercase hex (RockBot's consolidationReviewedHash)."""
    return hashlib.sha256(dotnet_utf8(content)).hexdigest()[:16].upper()


def cluster_hash(ids: Iterable[str]) -> str:
    """SHA-256 of ordinal-sorted ids joined by ',' → 16 hex, as RockBot stamps rejected/declined clusters.

    Ids as given: case kept, duplicates kept (RockBot's ``ClusterHash``, DreamService.cs @05346ff0).
    """
    joined = ",".join(sorted(ids, key=ordinal_key))
    return hashlib.sha256(dotnet_utf8(joined)).hexdigest()[:16].upper()


def dotnet_collapse(text: str) -> str:
    r"""``Regex.Replace(text, @"\s+", " ").Trim()`` with .NET's whitespace."""
    # Substring tests (memchr, in C), not a set walk over every character: this runs on every live entry of every
    # cycle (fold keys), and the set walk cost more than the collapse itself.
    if text.isascii() and not ("\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text):
        # ASCII without U+001C-U+001F: .NET's \s and Python's whitespace are the same six characters here.
        if _collapsed(text):
            return text  # nothing to collapse or trim (nearly every entry): the text itself
        return " ".join(text.split())  # the same answer, in C
    return _DOTNET_SPACE.sub(" ", text).strip(" ")


def _collapsed(ascii_text: str) -> bool:
    """Whether ``ascii_text`` (with none of U+001C-U+001F) has no whitespace run to collapse and none to trim: no
    whitespace but single spaces, and none at either end."""
    return not (
        "  " in ascii_text
        or "\n" in ascii_text
        or "\t" in ascii_text
        or "\r" in ascii_text
        or "\x0b" in ascii_text
        or "\x0c" in ascii_text
        or ascii_text[:1] == " "
        or ascii_text[-1:] == " "
    )


def fold_key(category: str | None, content: str) -> tuple[str, str]:
    """Exact-duplicate key: category trimmed+lowercased, whitespace runs collapsed; content stays case-sensitive.

    RockBot's ``ExactDuplicateKey`` (DreamService.cs @05346ff0; DreamSaveTimeExactDedupTests @76a7d276).
    """
    return (dotnet_collapse(category or "").lower(), dotnet_collapse(content))
