"""Text to train on: the course's own pages, H. G. Wells' *The Time Machine*, or a local file.

``load_corpus(name_or_path)`` is the one entry point:

- ``"course"`` (the default): the course's lesson pages, which this project owns and ships:
  ``course/index.md``, the chapters in the order of ``course/lessons.toml``, then
  ``course/glossary.md`` and ``course/faq.md`` (pages that don't exist yet are skipped), each
  without its YAML front matter, joined with blank lines.
- ``"time-machine"``: Project Gutenberg eBook #35, downloaded once, stripped of Gutenberg's
  header and licence footer, checked against a pinned sha256 and cached atomically under the
  user's cache directory. Later calls read the cache and never touch the network.
- anything else: the path of a UTF-8 text file; a Project Gutenberg header and licence footer,
  where present, are stripped the same way.

Every failure a user can cause or fix raises ``CorpusError`` with a one-line message that names
the problem and the fix.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import platformdirs

from core.atomic import atomic_write_bytes
from core.manifest import ManifestError, load_manifest

__all__ = [
    "CACHE_ENV",
    "COURSE_DIR",
    "CORPUS_NAMES",
    "CorpusError",
    "TIME_MACHINE_SHA256",
    "TIME_MACHINE_URL",
    "URL_ENV",
    "course_pages",
    "load_corpus",
    "strip_gutenberg",
    "time_machine_cache_path",
]

CORPUS_NAMES = ("course", "time-machine")

# The course's pages: <repository>/course (this file is <repository>/gpt/corpus.py).
COURSE_DIR = Path(__file__).resolve().parents[1] / "course"
COURSE_FIRST_PAGES = ("index.md",)
COURSE_LAST_PAGES = ("glossary.md", "faq.md")

# H. G. Wells, The Time Machine: Project Gutenberg eBook #35 (public domain).
TIME_MACHINE_URL = "https://www.gutenberg.org/cache/epub/35/pg35.txt"
URL_ENV = "GPT_COURSE_TIME_MACHINE_URL"  # overrides TIME_MACHINE_URL (e.g. a mirror)
CACHE_ENV = "GPT_COURSE_CACHE"  # overrides the cache directory
CACHE_APP_NAME = "gpt-from-the-ground-up"
TIME_MACHINE_FILE = "time-machine.txt"

# sha256 of the text AFTER strip_gutenberg (UTF-8, "\n" line endings), not of the raw download.
# Computed by running strip_gutenberg on a copy of the current Gutenberg edition of eBook #35
# whose header had already been removed (its licence footer still present). The assumption: a
# fresh download of TIME_MACHINE_URL, once stripped (BOM, "\r\n", header and blank lines up to
# the body removed), is byte for byte that same text, so it hashes to this value. If Gutenberg
# publishes a new edition the check fails with a CorpusError and nothing is cached.
TIME_MACHINE_SHA256 = "bc8933594a609b30bcedb73d84f78da8b7de0c6a94d547c65213ceac37f183dc"

DOWNLOAD_TIMEOUT_S = 60.0
MAX_DOWNLOAD_BYTES = 32 * 1024 * 1024  # eBook #35 is about 200 kB; refuse anything absurd
USER_AGENT = "gpt-from-the-ground-up (course corpus download; +https://www.gutenberg.org/)"

# "*** START OF THE PROJECT GUTENBERG EBOOK THE TIME MACHINE ***" and its older spellings
# ("THIS", "E-BOOK", no space after the asterisks); the END marker opens the licence footer.
_START_RE = re.compile(
    r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
_END_RE = re.compile(
    r"^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
# Older editions close the body with "End of the Project Gutenberg EBook of ..." just before
# the END marker; it belongs to the footer.
_OLD_END_LINE_RE = re.compile(
    r"\n[ \t]*End of (?:the |this )?Project Gutenberg'?s? E-?book\b[^\n]*\s*\Z",
    re.IGNORECASE,
)
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\n)+")
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


class CorpusError(Exception):
    """A corpus could not be loaded; the message names the problem and the fix."""


# --------------------------------------------------------------------------------------------
# Text helpers


def _normalise(text: str) -> str:
    """Drop a byte-order mark and turn "\\r\\n" and "\\r" line endings into "\\n"."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def strip_gutenberg(text: str) -> str:
    """Remove a Project Gutenberg header and licence footer from ``text``.

    The header is everything up to and including the ``*** START OF THE PROJECT GUTENBERG
    EBOOK ... ***`` line; the footer is everything from the ``*** END OF THE PROJECT GUTENBERG
    EBOOK ... ***`` line on. Either may be absent: a text whose header was already removed
    still loses its footer, and vice versa. Line endings become ``"\\n"`` and a byte-order mark
    is dropped. When a marker was found, blank lines before the body are removed and the body
    ends with exactly one newline; a text with neither marker is returned otherwise unchanged.
    """
    text = _normalise(text)
    start = _START_RE.search(text)
    body_start = start.end() if start else 0
    end = _END_RE.search(text, body_start)
    if start is None and end is None:
        return text
    body = text[body_start : end.start() if end else len(text)]
    if end is not None:
        body = _OLD_END_LINE_RE.sub("\n", body)
    body = _LEADING_BLANK_LINES_RE.sub("", body).rstrip()
    return body + "\n" if body else ""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# The course's own pages


def _strip_front_matter(text: str) -> str:
    return _FRONT_MATTER_RE.sub("", text, count=1)


def course_pages(course_dir: Path = COURSE_DIR) -> list[Path]:
    """index.md, the chapters in lessons.toml order, glossary.md, faq.md (each once): the
    'course' corpus, which the students' release carries too (instructor/release.py)."""
    manifest = course_dir / "lessons.toml"
    chapters: list[str] = []
    if manifest.is_file():
        try:
            chapters = [lesson.page for lesson in load_manifest(manifest).lessons]
        except ManifestError as error:  # its message names the file
            raise CorpusError(f"{error}; fix the lesson manifest") from error
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"cannot read {manifest}: {error}; fix the lesson manifest"
            ) from error
    pages: list[Path] = []
    for name in (*COURSE_FIRST_PAGES, *chapters, *COURSE_LAST_PAGES):
        path = course_dir / name
        if path not in pages and path.is_file():
            pages.append(path)
    return pages


def _load_course(course_dir: Path) -> str:
    if not course_dir.is_dir():
        raise CorpusError(
            f"the course's pages are not at {course_dir}: load the 'course' corpus from a full "
            "checkout of the repository, or pass 'time-machine' or a text file's path instead"
        )
    parts = []
    for path in course_pages(course_dir):
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as error:
            message = f"cannot read course page {path}: {error}; fix or remove it"
            raise CorpusError(message) from error
        text = _strip_front_matter(_normalise(text)).strip("\n")
        if text.strip():
            parts.append(text)
    if not parts:
        raise CorpusError(
            f"no course pages with text under {course_dir} (looked for index.md, the chapters "
            "in lessons.toml, glossary.md and faq.md): write them, or pass 'time-machine' or a "
            "text file's path instead"
        )
    return "\n\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# The Time Machine: download, verify, cache


def time_machine_cache_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the stripped text of *The Time Machine* is cached.

    ``cache_dir`` wins, then the environment variable ``GPT_COURSE_CACHE``, then the user's
    cache directory (``platformdirs.user_cache_dir("gpt-from-the-ground-up")``).
    """
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir(CACHE_APP_NAME)
    return Path(cache_dir).expanduser() / TIME_MACHINE_FILE


def _read_cache(path: Path, sha256: str) -> str | None:
    """The cached text when the file exists and its checksum matches, else None.

    The cache normally holds the stripped text. A user may also copy the raw ``pg35.txt`` there
    by hand (the offline error suggests it): when the file, once stripped, has the right
    checksum it is accepted and rewritten (atomically, best effort) in the stripped form.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() == sha256:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        text = strip_gutenberg(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None
    if _sha256(text) != sha256:
        return None
    try:
        atomic_write_bytes(path, text.encode("utf-8"))
    except OSError:
        pass  # the text is right; the cache just stays in its raw form
    return text


def _supply_hint(cache_path: Path) -> str:
    return (
        "download pg35.txt on a machine with internet and pass its path as the corpus, "
        f"or copy it to {cache_path}"
    )


def _download(url: str, timeout: float, cache_path: Path) -> bytes:
    """The body at ``url``, complete, or a CorpusError."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            declared = response.headers.get("Content-Length")
            chunks: list[bytes] = []
            received = 0
            while chunk := response.read(64 * 1024):
                chunks.append(chunk)
                received += len(chunk)
                if received > MAX_DOWNLOAD_BYTES:
                    raise CorpusError(
                        f"{url} sent more than {MAX_DOWNLOAD_BYTES} bytes, far more than the "
                        f"book; check the URL (or {URL_ENV}), or {_supply_hint(cache_path)}"
                    )
    except urllib.error.HTTPError as error:
        raise CorpusError(
            f"cannot download The Time Machine: {url} answered HTTP {error.code}; "
            f"check the URL (or {URL_ENV}), or {_supply_hint(cache_path)}"
        ) from error
    except http.client.IncompleteRead as error:
        raise CorpusError(
            f"download of {url} broke off after {len(error.partial)} bytes "
            f"({error.expected} more expected); nothing was cached: try again, or "
            f"{_supply_hint(cache_path)}"
        ) from error
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        reason = getattr(error, "reason", None) or error
        raise CorpusError(
            f"cannot download The Time Machine from {url} ({reason}); offline? "
            f"{_supply_hint(cache_path)}"
        ) from error
    if declared is not None and declared.isdigit() and int(declared) != received:
        raise CorpusError(
            f"download of {url} was incomplete ({received} of {declared} bytes); nothing was "
            f"cached: try again, or {_supply_hint(cache_path)}"
        )
    return b"".join(chunks)


def _load_time_machine(
    url: str | None,
    cache_dir: str | os.PathLike[str] | None,
    sha256: str | None,
    timeout: float,
) -> str:
    url = url or os.environ.get(URL_ENV) or TIME_MACHINE_URL
    expected = (sha256 or TIME_MACHINE_SHA256).lower()
    cache_path = time_machine_cache_path(cache_dir)

    cached = _read_cache(cache_path, expected)
    if cached is not None:
        return cached

    raw = _download(url, timeout, cache_path)
    try:
        text = strip_gutenberg(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{url} did not send UTF-8 text ({error}); nothing was cached: check the URL "
            f"(or {URL_ENV}), or {_supply_hint(cache_path)}"
        ) from error
    actual = _sha256(text)
    if actual != expected:
        raise CorpusError(
            f"The Time Machine from {url} has sha256 {actual} after stripping, expected "
            f"{expected} (a different edition or a corrupted transfer); nothing was cached: "
            f"{_supply_hint(cache_path)}"
        )
    try:
        atomic_write_bytes(cache_path, text.encode("utf-8"))
    except OSError as error:  # the text is good; only the cache is lost
        warnings.warn(
            f"could not cache The Time Machine at {cache_path} ({error}); it will be "
            f"downloaded again next time (set {CACHE_ENV} to a writable directory)",
            stacklevel=3,
        )
    return text


# --------------------------------------------------------------------------------------------
# Local files and the entry point


def _names_hint() -> str:
    names = ", ".join(repr(name) for name in CORPUS_NAMES)
    return f"valid corpora are {names} or the path of a UTF-8 text file"


def _looks_like_a_name(value: str) -> bool:
    return not any(sep in value for sep in ("/", "\\")) and not Path(value).suffix


def _load_file(value: str) -> str:
    path = Path(value).expanduser()
    if not path.exists():
        if _looks_like_a_name(value):
            raise CorpusError(f"unknown corpus {value!r}: {_names_hint()}")
        raise CorpusError(f"corpus file not found: {path}; check the path ({_names_hint()})")
    if path.is_dir():
        raise CorpusError(f"corpus path {path} is a directory; pass a text file ({_names_hint()})")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"corpus file {path} is not UTF-8 text ({error}); convert it to UTF-8"
        ) from error
    except OSError as error:
        raise CorpusError(f"cannot read corpus file {path}: {error.strerror or error}") from error
    return strip_gutenberg(text)


def load_corpus(
    name_or_path: str | os.PathLike[str] = "course",
    *,
    url: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    sha256: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT_S,
    course_dir: str | os.PathLike[str] | None = None,
) -> str:
    """Return the text of a corpus, with ``"\\n"`` line endings.

    Args:
        name_or_path: ``"course"`` (the course's own pages, the default), ``"time-machine"``
            (Project Gutenberg eBook #35, downloaded once and cached), or the path of a UTF-8
            text file (a Gutenberg header and licence footer, where present, are stripped).
            The two names take precedence over files of the same name; write ``./course`` for
            such a file.
        url: where to download *The Time Machine* (default: the environment variable
            ``GPT_COURSE_TIME_MACHINE_URL``, else ``TIME_MACHINE_URL``).
        cache_dir: where to cache it (default: ``GPT_COURSE_CACHE``, else the user's cache
            directory).
        sha256: the expected sha256 of the stripped text (default: ``TIME_MACHINE_SHA256``).
        timeout: seconds the download may stall before it is abandoned.
        course_dir: the folder of the course's pages (default: ``COURSE_DIR``).

    Raises:
        CorpusError: an unknown name, a missing or unreadable file, a failed or corrupted
            download, or missing course pages.
    """
    value = os.fspath(name_or_path)
    if value == "course":
        return _load_course(Path(course_dir) if course_dir is not None else COURSE_DIR)
    if value == "time-machine":
        return _load_time_machine(url, cache_dir, sha256, timeout)
    if not value.strip():
        raise CorpusError(f"empty corpus name: {_names_hint()}")
    return _load_file(value)
