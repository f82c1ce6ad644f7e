"""Tests for gpt.corpus: offline, against a loopback HTTP server and made-up files."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpt import corpus
from gpt.corpus import CorpusError, load_corpus, strip_gutenberg

# A small invented book in Project Gutenberg's layout (nothing here comes from a real eBook).
BODY = (
    "A LIGHTHOUSE INVENTORY\n"
    "\n"
    "One lamp, trimmed. Two brass keys, one bent.\n"
    "A logbook whose last entry reads: fog, then nothing.\n"
    "\n"
    "    An indented line, kept as it is.\n"
    "The keeper's kettle \u2014 still warm.\n"
)
HEADER = (
    "The Project Gutenberg eBook of A Lighthouse Inventory\n"
    "\n"
    "Title: A Lighthouse Inventory\n"
    "Author: Nobody In Particular\n"
    "\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK A LIGHTHOUSE INVENTORY ***\n"
    "\n"
    "\n"
)
FOOTER = (
    "\n"
    "\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK A LIGHTHOUSE INVENTORY ***\n"
    "\n"
    "An invented licence paragraph that must not survive stripping.\n"
)
# What a download looks like on the wire: a byte-order mark and Windows line endings.
RAW = ("\ufeff" + HEADER + BODY + FOOTER).replace("\n", "\r\n").encode("utf-8")
BODY_SHA256 = hashlib.sha256(BODY.encode("utf-8")).hexdigest()


@dataclass
class Book:
    """What the loopback server sends; tests change it between requests."""

    body: bytes = RAW
    status: int = 200
    declared_length: int | None = None  # Content-Length to claim; None = the true length
    requests: int = 0


class _Server(http.server.ThreadingHTTPServer):
    book: Book


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the connection closes after every response
    server: _Server

    def do_GET(self) -> None:
        book = self.server.book
        book.requests += 1
        if book.status != 200:
            self.send_error(book.status)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        length = book.declared_length if book.declared_length is not None else len(book.body)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(book.body)  # then the handler returns and the connection closes

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep pytest's output quiet


@dataclass
class Loopback:
    url: str
    book: Book
    stop: Callable[[], None]


@pytest.fixture
def server() -> Iterator[Loopback]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.book = Book()
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)

    host, port = httpd.server_address[:2]
    yield Loopback(url=f"http://{host}:{port}/cache/epub/1/pg1.txt", book=httpd.book, stop=stop)
    stop()


def _refused_url() -> str:
    """A loopback URL where nothing listens, so connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/pg35.txt"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test may reach Gutenberg or the user's real cache, whatever it forgets to pass."""
    monkeypatch.setenv(corpus.URL_ENV, _refused_url())
    monkeypatch.setenv(corpus.CACHE_ENV, str(tmp_path / "env-cache"))


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    path = tmp_path / "cache"
    path.mkdir()
    return path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _time_machine(server_url: str, cache_dir: Path, **kwargs: object) -> str:
    return load_corpus(
        "time-machine", url=server_url, cache_dir=cache_dir, sha256=BODY_SHA256, **kwargs
    )


# --------------------------------------------------------------------------------------------
# strip_gutenberg


def test_strip_gutenberg_removes_header_and_footer() -> None:
    assert strip_gutenberg(HEADER + BODY + FOOTER) == BODY


def test_strip_gutenberg_normalises_bom_and_line_endings() -> None:
    assert strip_gutenberg(RAW.decode("utf-8")) == BODY
    assert strip_gutenberg(("\ufeff" + HEADER + BODY + FOOTER).replace("\n", "\r")) == BODY


def test_strip_gutenberg_footer_only_when_header_already_gone() -> None:
    assert strip_gutenberg(BODY + FOOTER) == BODY


def test_strip_gutenberg_keeps_the_indentation_of_the_first_line() -> None:
    indented = "   I.\n   THE LAMP\n\nText.\n"
    assert strip_gutenberg(HEADER + indented + FOOTER) == indented


def test_strip_gutenberg_header_only() -> None:
    assert strip_gutenberg(HEADER + BODY + "\n\n") == BODY


def test_strip_gutenberg_older_marker_spellings() -> None:
    old = (
        "Header text\n***START OF THIS PROJECT GUTENBERG EBOOK A LIGHTHOUSE INVENTORY***\n\n"
        + BODY
        + "\n\nEnd of the Project Gutenberg EBook of A Lighthouse Inventory\n\n"
        + "*** END OF THIS PROJECT GUTENBERG EBOOK A LIGHTHOUSE INVENTORY ***\nlicence\n"
    )
    assert strip_gutenberg(old) == BODY


def test_strip_gutenberg_leaves_text_without_markers_alone() -> None:
    text = "\n  Plain text, no markers.\n\n"
    assert strip_gutenberg(text) == text
    assert strip_gutenberg(text.replace("\n", "\r\n")) == text


# --------------------------------------------------------------------------------------------
# time-machine: download, checksum, atomic cache


def test_download_strips_caches_and_then_uses_the_cache_offline(
    server: Loopback, cache_dir: Path
) -> None:
    assert _time_machine(server.url, cache_dir) == BODY
    assert server.book.requests == 1
    assert _files(cache_dir) == [corpus.TIME_MACHINE_FILE]
    assert (cache_dir / corpus.TIME_MACHINE_FILE).read_bytes() == BODY.encode("utf-8")

    server.stop()  # the second call must not need the network
    assert _time_machine(server.url, cache_dir) == BODY
    assert server.book.requests == 1


def test_checksum_mismatch_raises_and_leaves_no_cache_or_temp_file(
    server: Loopback, cache_dir: Path
) -> None:
    with pytest.raises(CorpusError, match="sha256") as info:
        load_corpus("time-machine", url=server.url, cache_dir=cache_dir, sha256="0" * 64)
    assert "\n" not in str(info.value)
    assert "nothing was cached" in str(info.value)
    assert _files(cache_dir) == []


def test_broken_transfer_leaves_nothing_and_a_retry_succeeds(
    server: Loopback, cache_dir: Path
) -> None:
    server.book.declared_length = len(RAW) + 1000  # claim more than is sent, then hang up
    with pytest.raises(CorpusError, match="incomplete|broke off") as info:
        _time_machine(server.url, cache_dir)
    assert "try again" in str(info.value)
    assert _files(cache_dir) == []

    server.book.declared_length = None
    assert _time_machine(server.url, cache_dir) == BODY
    assert _files(cache_dir) == [corpus.TIME_MACHINE_FILE]
    assert server.book.requests == 2


def test_truncated_body_is_rejected_even_when_it_would_still_strip(
    server: Loopback, cache_dir: Path
) -> None:
    server.book.body = RAW[: len(RAW) // 2]
    server.book.declared_length = len(RAW)
    with pytest.raises(CorpusError, match="incomplete|broke off"):
        load_corpus("time-machine", url=server.url, cache_dir=cache_dir, sha256=None)
    assert _files(cache_dir) == []


def test_offline_without_cache_says_how_to_supply_the_file(cache_dir: Path) -> None:
    with pytest.raises(CorpusError) as info:
        _time_machine(_refused_url(), cache_dir)
    message = str(info.value)
    assert "\n" not in message
    assert "cannot download" in message
    assert "pass its path" in message
    assert "copy it to" in message
    assert str(cache_dir / corpus.TIME_MACHINE_FILE) in message
    assert _files(cache_dir) == []


def test_http_error_is_a_corpus_error(server: Loopback, cache_dir: Path) -> None:
    server.book.status = 404
    with pytest.raises(CorpusError, match="HTTP 404"):
        _time_machine(server.url, cache_dir)
    assert _files(cache_dir) == []


def test_valid_cache_is_used_without_any_request(server: Loopback, cache_dir: Path) -> None:
    (cache_dir / corpus.TIME_MACHINE_FILE).write_bytes(BODY.encode("utf-8"))
    assert _time_machine(server.url, cache_dir) == BODY
    assert server.book.requests == 0


def test_raw_download_copied_to_the_cache_by_hand_is_accepted(cache_dir: Path) -> None:
    cached = cache_dir / corpus.TIME_MACHINE_FILE
    cached.write_bytes(RAW)  # what the offline error suggests: copy pg35.txt there
    assert _time_machine(_refused_url(), cache_dir) == BODY
    assert cached.read_bytes() == BODY.encode("utf-8")  # rewritten in the stripped form
    assert _files(cache_dir) == [corpus.TIME_MACHINE_FILE]


def test_corrupt_cache_is_downloaded_again_and_replaced(server: Loopback, cache_dir: Path) -> None:
    cached = cache_dir / corpus.TIME_MACHINE_FILE
    cached.write_text(BODY.replace("fog", "FOG"), encoding="utf-8")
    assert _time_machine(server.url, cache_dir) == BODY
    assert server.book.requests == 1
    assert cached.read_bytes() == BODY.encode("utf-8")
    assert _files(cache_dir) == [corpus.TIME_MACHINE_FILE]


def test_failed_cache_write_leaves_no_temp_file(
    server: Loopback, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(corpus.os, "replace", refuse)
    with pytest.warns(UserWarning, match="could not cache"):
        assert _time_machine(server.url, cache_dir) == BODY
    assert _files(cache_dir) == []


def test_environment_variables_choose_url_and_cache(
    server: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_cache = tmp_path / "from-env"
    monkeypatch.setenv(corpus.URL_ENV, server.url)
    monkeypatch.setenv(corpus.CACHE_ENV, str(env_cache))
    assert load_corpus("time-machine", sha256=BODY_SHA256) == BODY
    assert server.book.requests == 1
    assert corpus.time_machine_cache_path() == env_cache / corpus.TIME_MACHINE_FILE
    assert _files(env_cache) == [corpus.TIME_MACHINE_FILE]


def test_pinned_source_and_checksum_look_right() -> None:
    assert corpus.TIME_MACHINE_URL == "https://www.gutenberg.org/cache/epub/35/pg35.txt"
    assert len(corpus.TIME_MACHINE_SHA256) == 64
    assert set(corpus.TIME_MACHINE_SHA256) <= set("0123456789abcdef")


# --------------------------------------------------------------------------------------------
# Local files and names


def test_local_file_with_header_and_footer_is_stripped(tmp_path: Path) -> None:
    path = tmp_path / "book.txt"
    path.write_bytes(RAW)
    assert load_corpus(str(path)) == BODY
    assert load_corpus(path) == BODY


def test_local_file_without_markers_is_returned_as_is(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("first line\r\nsecond line\r\n", encoding="utf-8", newline="")
    assert load_corpus(str(path)) == "first line\nsecond line\n"


def test_missing_file_names_the_path_and_the_valid_corpora(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such-book.txt"
    with pytest.raises(CorpusError, match="not found") as info:
        load_corpus(str(missing))
    assert str(missing) in str(info.value)
    assert "'time-machine'" in str(info.value)


def test_unknown_name_lists_the_valid_names() -> None:
    with pytest.raises(CorpusError, match="unknown corpus 'shakespeare'") as info:
        load_corpus("shakespeare")
    assert "'course'" in str(info.value)
    assert "'time-machine'" in str(info.value)


def test_directory_is_not_a_corpus_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="is a directory"):
        load_corpus(str(tmp_path))


def test_non_utf8_file_is_a_corpus_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(CorpusError, match="not UTF-8"):
        load_corpus(str(path))


# --------------------------------------------------------------------------------------------
# The course's own pages


def _lesson(number: int, page: str) -> str:
    """A lesson of the manifest with nothing but what the corpus reads: its page."""
    return (
        f'[[lesson]]\nnumber = {number}\nslug = "l{number}"\ntitle = "L"\npage = "{page}"\n'
        f'module = "m{number}"\nlevel = "beginner"\nfunctions = ["f"]\n'
        'sections = { f = "s" }\n\n'
    )


def _fake_course(root: Path) -> Path:
    course = root / "course"
    (course / "chapters").mkdir(parents=True)
    pages = ["02-second", "09-not-written-yet", "01-first"]
    (course / "lessons.toml").write_text(
        "".join(_lesson(number, f"chapters/{page}.md") for number, page in enumerate(pages, 1)),
        encoding="utf-8",
    )
    (course / "index.md").write_text(
        "---\ntitle: Home\nhide: [toc]\n---\n\n# Welcome\n\nStart here.\n", encoding="utf-8"
    )
    (course / "chapters" / "01-first.md").write_text("# First\n\nAlpha.\n", encoding="utf-8")
    (course / "chapters" / "02-second.md").write_text(
        "\ufeff---\r\ntitle: Second\r\n---\r\n# Second\r\n\r\nBeta --- gamma.\r\n",
        encoding="utf-8",
    )
    (course / "glossary.md").write_text("---\ntitle: Glossary\n---\n# Glossary\n", encoding="utf-8")
    return course  # no faq.md: skipped


def test_course_corpus_joins_pages_in_manifest_order_without_front_matter(
    tmp_path: Path,
) -> None:
    text = load_corpus("course", course_dir=_fake_course(tmp_path))
    assert text == (
        "# Welcome\n\nStart here.\n\n"
        "# Second\n\nBeta --- gamma.\n\n"
        "# First\n\nAlpha.\n\n"
        "# Glossary\n"
    )


def test_course_corpus_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus, "COURSE_DIR", _fake_course(tmp_path))
    assert load_corpus().startswith("# Welcome\n")


def test_course_dir_defaults_to_the_repository_course_folder() -> None:
    assert corpus.COURSE_DIR == Path(__file__).resolve().parents[2] / "course"


def test_missing_course_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="course's pages are not at"):
        load_corpus("course", course_dir=tmp_path / "nowhere")


def test_course_folder_without_pages_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "lessons.toml").write_text(_lesson(1, "chapters/x.md"))
    with pytest.raises(CorpusError, match="no course pages"):
        load_corpus("course", course_dir=tmp_path)
