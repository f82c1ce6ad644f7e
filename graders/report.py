"""The grading report: a JSON document rewritten after every check, and the links of its hints
(its terminal view is graders/terminal.py).

Schema (``complete`` is false until the run ends, so a report left by a killed run says so;
checks not graded yet have ``passed: false`` and detail "not graded"):

    {"target", "hidden", "complete", "points", "max_points",
     "lessons": [{"slug", "title", "points", "max_points", "import_error", "graded",
                  "fingerprint", "flagged": [{"function", "file", "line", "reason"}],
                  "checks": [{"id", "function", "points", "max_points", "passed", "hint",
                              "link", "url", "detail", "hidden", "explained_by"}]}]}

A grading rewrites the lessons it grades and keeps the others of the report it finds (those
a grading of the same ``target``, with the same ``hidden``, finished), in the manifest's order:
``nox -s grade -- windows`` after a full grading leaves every other lesson's result in place.
``points`` and ``max_points`` add up every lesson the report holds; ``complete`` is about the
latest grading. A lesson's ``graded`` is when its grading finished (UTC, ISO 8601; null while it
runs) and ``fingerprint`` the sha256 of the files it graded: its module and the package's
modules that one imports (core/fingerprint.py), so a reader can tell a result of the code as
it is now from one of an older version.

``import_error`` is null, or the one line that says why the lesson's module failed to import
(exception, file and line); its checks then have detail "not run (module failed to import)"
and no hint.

``flagged`` lists, for an instructor to review, what the checker's reading of the lesson's files
found before anything ran (graders/rules.py): per by-hand function, what only its source shows
(``adamw_step`` building a ``torch.optim`` optimizer), and with ``function`` null a file the
reading left out (over its size limits). No point rests on a flag. Empty when there is nothing
to read. A file Python cannot parse is no flag: it fails the lesson's import, and
``import_error`` names it, its line and the cause.

``explained_by`` is null, or the id of an earlier failed check whose mistake explains this
failure too: the same diagnosed mistake of the same function, a diagnosed mistake of the same
function where this check recognised none, or a failure of a function this one uses
(TokenWindows uses shift). The student fixes that one thing first.

``link`` is the chapter page and section relative to course/ (chapters/01-tokens.md#x),
``url`` the same place on the built site (chapters/01-tokens/#x). ``hint`` and ``detail`` are
null for a passed check; ``detail`` is always null for a hidden check, so no hidden input or
expected value ever leaves the grader.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.atomic import atomic_write_bytes
from core.fingerprint import fingerprint
from core.manifest import ROOT, Check, Lesson, load_manifest, site_url

from .hints import NOT_IMPLEMENTED
from .rules import Flag
from .where import released_site

NOT_GRADED = "not graded"


class Report:
    def __init__(
        self,
        target: Path,
        hidden: bool,
        lessons: Sequence[tuple[Lesson, Sequence[Check]]],
        json_path: Path | None,
        *,
        reveal_hidden: bool = False,
        order: Sequence[str] = (),
    ) -> None:
        """``order``: every lesson's slug in the manifest's order; the lessons of it that this
        grading leaves out keep their results from the report at ``json_path``."""
        self.json_path = json_path
        self.reveal_hidden = reveal_hidden
        self._checks: dict[str, dict[str, Any]] = {}
        self._lesson_of: dict[str, dict[str, Any]] = {}
        self._default_hint: dict[str, str] = {}  # check id -> the manifest's own hint
        self._uses: dict[str, tuple[str, ...]] = {}  # check id -> the functions it builds on
        self._left: dict[str, int] = {}  # lesson slug -> checks not recorded yet
        self._written: dict[str, str] = {}  # lesson slug -> its entry's JSON, until it changes
        self.data: dict[str, Any] = {
            "target": str(target),
            "hidden": hidden,
            "complete": False,
            "points": 0,
            "max_points": 0,
            "lessons": [],
        }
        for lesson, checks in lessons:
            entry: dict[str, Any] = {
                "slug": lesson.slug,
                "title": lesson.title,
                "points": 0,
                "max_points": sum(c.points for c in checks),
                "import_error": None,
                "graded": None,
                "fingerprint": fingerprint(target, lesson.module),
                "flagged": [],
                "checks": [],
            }
            self._left[lesson.slug] = len(checks)
            for check in checks:
                row = {
                    "id": check.id,
                    "function": check.function,
                    "points": 0,
                    "max_points": check.points,
                    "passed": False,
                    "hint": None,
                    "link": check.link,
                    "url": check.url,
                    "detail": NOT_GRADED,
                    "hidden": check.hidden,
                    "explained_by": None,
                }
                self._default_hint[check.id] = check.hint
                self._uses[check.id] = uses(lesson.module, check.function)
                entry["checks"].append(row)
                self._checks[check.id] = row
                self._lesson_of[check.id] = entry
            self.data["lessons"].append(entry)
        kept = self._kept(order, {entry["slug"] for entry in self.data["lessons"]})
        if kept:
            rank = {slug: index for index, slug in enumerate(order)}
            self.data["lessons"] = sorted(
                [*self.data["lessons"], *kept], key=lambda e: rank.get(e["slug"], len(rank))
            )
        self.data["max_points"] = sum(e["max_points"] for e in self.data["lessons"])
        self.data["points"] = sum(e["points"] for e in self.data["lessons"])
        self.write()

    def _kept(self, order: Sequence[str], graded: set[str]) -> list[dict[str, Any]]:
        """The finished lessons of the report at ``json_path`` that this grading leaves out,
        when that report graded the same package the same way."""
        if self.json_path is None or not order:
            return []
        try:
            earlier = json.loads(self.json_path.read_text(encoding="utf-8"))
            same = (earlier["target"], earlier["hidden"]) == (
                self.data["target"],
                self.data["hidden"],
            )
            lessons = earlier["lessons"] if same else []
            return [
                entry
                for entry in lessons
                if entry["slug"] in order and entry["slug"] not in graded and entry.get("graded")
            ]
        except (OSError, ValueError, KeyError, TypeError):
            return []  # none yet, or not a report: nothing to keep

    def record(
        self,
        check: Check,
        passed: bool,
        hint: str | None,
        detail: str | None,
        section: str | None = None,
    ) -> None:
        """A check's outcome; ``section``: where the rule of the diagnosed mistake is taught,
        when that is not the check's own section (the link then goes there)."""
        row = self._checks[check.id]
        section = section or check.section
        row["link"], row["url"] = f"{check.page}#{section}", site_url(check.page, section)
        row["passed"] = passed
        row["points"] = check.points if passed else 0
        row["hint"] = None if passed else hint
        shown = None if passed or (check.hidden and not self.reveal_hidden) else detail
        row["detail"] = None if shown is None else printable(shown)
        lesson = self._lesson_of[check.id]
        self._written.pop(lesson["slug"], None)
        self._left[lesson["slug"]] -= 1
        if not self._left[lesson["slug"]]:
            lesson["graded"] = datetime.now(UTC).isoformat(timespec="seconds")
        self._explain(lesson)
        lesson["points"] = sum(c["points"] for c in lesson["checks"])
        self.data["points"] = sum(e["points"] for e in self.data["lessons"])
        self.write()

    def import_failed(self, slug: str, message: str) -> None:
        """The lesson's module failed to import: said once, for the whole lesson."""
        lesson = self.lesson(slug)
        if lesson.get("import_error") is None:
            self._written.pop(slug, None)
            lesson["import_error"] = printable(message)
            self.write()

    def flag(self, slug: str, flags: Sequence[Flag]) -> None:
        """What the reading of the lesson's files found for review (graders/rules.py)."""
        self._written.pop(slug, None)
        self.lesson(slug)["flagged"] = [
            {"function": f.function, "file": f.file, "line": f.line, "reason": printable(f.reason)}
            for f in flags
        ]
        self.write()

    def _explain(self, lesson: dict[str, Any]) -> None:
        """Point each failure that an earlier one explains at that one (``explained_by``)."""
        earlier: list[dict[str, Any]] = []
        for row in lesson["checks"]:
            row["explained_by"] = None
            if (
                row["passed"]
                or row["detail"] == NOT_GRADED
                or row["hint"] in (None, NOT_IMPLEMENTED)
            ):
                continue
            diagnosed = row["hint"] != self._default_hint[row["id"]]
            for first in earlier:
                same_function = first["function"] == row["function"]
                same_mistake = same_function and first["hint"] == row["hint"]
                # A recognised mistake explains the checks of its function that fail without
                # recognising one: they are told under it, not with hints of their own.
                recognised = first["hint"] != self._default_hint[first["id"]]
                if (
                    (same_mistake and diagnosed)
                    or (same_function and recognised and not diagnosed)
                    or first["function"] in self._uses[row["id"]]
                ):
                    row["explained_by"] = first["explained_by"] or first["id"]
                    break
            earlier.append(row)

    def row(self, check_id: str) -> dict[str, Any]:
        """A check's entry, as recorded so far."""
        return self._checks[check_id]

    def lesson(self, slug: str) -> dict[str, Any]:
        return next(e for e in self.data["lessons"] if e["slug"] == slug)

    def finish(self) -> None:
        self.data["complete"] = True
        self.write()

    def write(self) -> None:
        if self.json_path is not None:
            atomic_write_bytes(self.json_path, self.text().encode("utf-8"))

    def text(self) -> str:
        """The report as ``write_json_atomic`` writes it, byte for byte, with each lesson's
        entry encoded again only when it changed: the report is rewritten after every check,
        and encoding every lesson each time took a fourteenth of the checker's processor time
        in gradings of many lessons (json's indented encoder is pure Python)."""
        *head, last = self.data
        if last != "lessons":  # not the layout this assembles: encoded whole
            return json.dumps(self.data, indent=2) + "\n"
        top = json.dumps({key: self.data[key] for key in head}, indent=2)
        entries = []
        for entry in self.data["lessons"]:
            text = self._written.get(entry["slug"])
            if text is None:  # nested two levels deep: every line indented by four more
                text = "    " + json.dumps(entry, indent=2).replace("\n", "\n    ")
                self._written[entry["slug"]] = text
            entries.append(text)
        lessons = "[\n" + ",\n".join(entries) + "\n  ]" if entries else "[]"
        return top.removesuffix("\n}") + ',\n  "lessons": ' + lessons + "\n}\n"


# Terminal escape sequences (CSI, OSC, ...) and the other control characters.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clearing the screen
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # any other escape, C0 and C1 controls
)


def printable(text: str) -> str:
    """Student-controlled text (an exception's message, a returned value's summary) with the
    terminal's escape sequences and control characters removed: it reaches the console, the
    .log files and the report, where they could rewrite what the instructor sees."""
    return _CONTROL.sub("", text)


def follows(first: dict[str, Any], row: dict[str, Any]) -> str:
    """How ``first`` explains ``row`` (its ``explained_by``): ``"same"`` mistake of the same
    function, ``"after"`` (another failure of that function, fixed with it), or ``"uses"``
    (``row``'s function uses ``first``'s)."""
    if row["function"] != first["function"]:
        return "uses"
    return "same" if row["hint"] == first["hint"] else "after"


def told_with(first: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The line that tells ``rows`` (failures ``first`` explains, all of one :func:`follows`
    kind) under ``first``'s mistake: the terminal prints it below that mistake, a notebook's
    cell of such a row prints it instead of a hint of its own. One mistake, one message."""
    ids = ", ".join(r["id"] for r in rows)
    fail = "fails" if len(rows) == 1 else "fail"
    kind = follows(first, rows[0])
    if kind == "same":
        return f"one mistake: {ids} {fail} from the same mistake too"
    if kind == "after":
        return f"{ids} {fail} too: fix this mistake first, then grade again"
    users = ", ".join(sorted({r["function"] for r in rows}))
    function = first["function"]
    return f"one mistake: {users} uses {function}, so {ids} {fail} too; fix {function} first"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so that readers see the old file or the new one, never a part."""
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def href(link: str, root: Path | None = None) -> str:
    """Where a student can open a check's section (``link``: ``chapters/02-x.md#y``, relative
    to course/): the course site's address when it is known ($COURSE_SITE_URL, or the
    ``site_url`` a release recorded), else the built site's page (``build/site/...``), else the
    chapter's source file at the section's line (``/path/course/chapters/02-x.md:44``, which
    editors and terminals open), else the path relative to the repository."""
    root = Path(root) if root is not None else ROOT
    page, _, section = link.partition("#")
    where = site_url(page, section or None)
    base = os.environ.get("COURSE_SITE_URL") or released_site(root)
    if base:
        return base.rstrip("/") + "/" + where
    built = root / "build" / "site" / site_url(page) / "index.html"
    if built.is_file():
        return built.as_uri() + (f"#{section}" if section else "")
    source = root / "course" / page
    if source.is_file():
        marker = f"{{#{section}}}"
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if section and line.lstrip().startswith("#") and marker in line:
                return f"{source}:{number}"
        return str(source)
    return f"course/{link}"


def uses(module: str, function: str) -> tuple[str, ...]:
    """The functions of the same lesson that ``function`` runs with the submission's own code
    (its ``builds_on`` in the manifest): where the checker answers them itself (the secret
    half, the instructor's graders) a mistake in one costs nothing else, so none. An earlier
    lesson's function is answered in the release too (graders/replayed.py), so never one."""
    from .secret_half import installed_secret

    if installed_secret("dependencies") is not None:
        return ()
    return load_manifest().lesson(module).own_dependencies(function)
