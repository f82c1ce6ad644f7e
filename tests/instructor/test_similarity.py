"""Similar submissions: a renamed copy and a padded copy of another student's work
rank first in every lesson of a test class where four students wrote the reference solution
word for word, three others wrote correct solutions of their own, and one submitted one line;
what every correct solution writes the same way is not flagged."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Correct solutions of the students' own, by lesson: function -> body.
OWN = {
    "attention": {
        "alex": {
            "causal_mask": "idx = torch.arange(T)\nreturn idx[:, None] >= idx[None, :]",
            "attention": """\
                d = q.size(-1)
                w = torch.einsum("...td,...sd->...ts", q, k) / d ** 0.5
                if mask is not None:
                    w = torch.where(mask, w, torch.full_like(w, -math.inf))
                w = w.softmax(dim=-1)
                return torch.einsum("...ts,...sd->...td", w, v)""",
        },
        "bea": {
            "causal_mask": "return torch.tril(torch.ones((T, T))).bool()",
            "attention": """\
                scale = 1.0 / math.sqrt(k.shape[-1])
                logits = torch.matmul(q, k.transpose(-1, -2)) * scale
                if mask is not None:
                    logits = logits.masked_fill(mask.logical_not(), float("-inf"))
                probs = torch.nn.functional.softmax(logits, dim=-1)
                out = torch.matmul(probs, v)
                return out""",
        },
        "cleo": {
            "causal_mask": "return torch.ones(T, T).tril() == 1",
            "attention": """\
                s = (q @ k.mT) / math.sqrt(q.shape[-1])
                if mask is not None:
                    s = s.masked_fill(mask == False, -torch.inf)  # noqa: E712
                return s.softmax(-1) @ v""",
        },
    },
    "embeddings": {
        "alex": {
            "lookup": "flat = torch.index_select(table, 0, ids.reshape(-1))\n"
            "return flat.reshape(*ids.shape, table.shape[-1])",
            "one_hot_lookup": """\
                rows = torch.zeros(*ids.shape, table.shape[0], dtype=table.dtype)
                rows.scatter_(-1, ids.unsqueeze(-1), 1.0)
                return rows @ table""",
            "add_positions": """\
                n = vectors.size(-2)
                if n > pos_table.size(0):
                    raise ValueError("too long for the position table")
                return vectors + pos_table[:n]""",
            "nearest": """\
                unit = table / table.norm(dim=-1, keepdim=True)
                scores = unit @ unit[index]
                out = []
                for row in scores.argsort(descending=True).tolist():
                    if row != index and len(out) < k:
                        out.append((row, scores[row].item()))
                return out""",
        },
        "bea": {
            "lookup": "return F.embedding(ids, table)",
            "one_hot_lookup": """\
                eye = torch.eye(table.shape[0], dtype=table.dtype)
                return eye[ids] @ table""",
            "add_positions": """\
                length = vectors.shape[-2]
                if length > len(pos_table):
                    raise ValueError(f"{length} positions, the table has {len(pos_table)}")
                return vectors + pos_table[:length]""",
            "nearest": """\
                target = table[index]
                sims = []
                for i in range(table.shape[0]):
                    if i == index:
                        continue
                    s = torch.dot(target, table[i]) / (target.norm() * table[i].norm())
                    sims.append((i, float(s)))
                sims.sort(key=lambda pair: -pair[1])
                return sims[:k]""",
        },
        "cleo": {
            "lookup": "return table[ids]",
            "one_hot_lookup": "return F.one_hot(ids, table.size(0)).type_as(table) @ table",
            "add_positions": """\
                T = vectors.shape[-2]
                if T > pos_table.shape[0]:
                    raise ValueError("sequence longer than the position table")
                return vectors + pos_table[:T]""",
            "nearest": """\
                s = F.cosine_similarity(table, table[index : index + 1], dim=1)
                s[index] = float("-inf")
                top = s.topk(k)
                return list(zip(top.indices.tolist(), top.values.tolist()))""",
        },
    },
    "windows": {
        "alex": {
            "shift": "x = ids[..., :-1]\ny = ids[..., 1:]\nreturn x, y",
            "window_starts": """\
                starts = []
                s = 0
                while s + context_length < n_tokens:
                    starts.append(s)
                    s += stride
                return starts""",
            "TokenWindows.__init__": """\
                self.data = ids.long() if torch.is_tensor(ids) else torch.tensor(ids)
                self.n = context_length
                self.offsets = window_starts(self.data.numel(), context_length, stride)""",
            "TokenWindows.__len__": "return len(self.offsets)",
            "TokenWindows.__getitem__": """\
                o = self.offsets[i]
                chunk = self.data[o : o + self.n + 1]
                return chunk[:-1], chunk[1:]""",
            "make_loader": """\
                g = None
                if seed is not None:
                    g = torch.Generator()
                    g.manual_seed(seed)
                ds = TokenWindows(ids, context_length, stride)
                return DataLoader(ds, batch_size, shuffle=shuffle, drop_last=drop_last, generator=g)
                """,
        },
        "bea": {
            "shift": "n = ids.shape[-1] - 1\nreturn ids.narrow(-1, 0, n), ids.narrow(-1, 1, n)",
            "window_starts": """\
                last = n_tokens - context_length
                return [i for i in range(0, max(last, 0), stride)]""",
            "TokenWindows.__init__": """\
                self.tokens = torch.as_tensor(ids).to(torch.long)
                self.size = context_length
                self.index = list(range(0, len(self.tokens) - context_length, stride))""",
            "TokenWindows.__len__": "return self.index.__len__()",
            "TokenWindows.__getitem__": """\
                begin = self.index[i]
                end = begin + self.size
                return self.tokens[begin:end], self.tokens[begin + 1 : end + 1]""",
            "make_loader": """\
                dataset = TokenWindows(ids, context_length, stride)
                kwargs = {"batch_size": batch_size, "shuffle": shuffle, "drop_last": drop_last}
                if seed is not None:
                    kwargs["generator"] = torch.Generator().manual_seed(seed)
                return DataLoader(dataset, **kwargs)""",
        },
        "cleo": {
            "shift": "return ids[..., :-1].clone(), ids[..., 1:].clone()",
            "window_starts": "return list(range(0, max(0, n_tokens - context_length), stride))",
            "TokenWindows.__init__": """\
                self.ids = ids.to(torch.long) if torch.is_tensor(ids) else torch.LongTensor(ids)
                self.context_length = context_length
                self.starts = window_starts(self.ids.shape[0], context_length, stride)""",
            "TokenWindows.__len__": "return len(self.starts)",
            "TokenWindows.__getitem__": """\
                window = self.ids[self.starts[i] : self.starts[i] + self.context_length + 1]
                return shift(window)""",
            "make_loader": """\
                gen = torch.Generator().manual_seed(seed) if seed is not None else None
                windows = TokenWindows(ids, context_length, stride)
                return DataLoader(
                    windows, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                    generator=gen,
                )""",
        },
    },
}
LESSONS = list(OWN)
REFERENCE = ("ann", "bob", "cat", "dan")  # the reference solution, word for word


def _module(lesson: str) -> str:
    from core.manifest import load_manifest

    return load_manifest().lesson(lesson).module


def stub(lesson: str) -> str:
    return (ROOT / "exercises" / f"{_module(lesson)}.py").read_text()


def implement(source: str, bodies: dict[str, str]) -> str:
    """The stub with these functions' ``raise NotImplementedError(...)`` replaced by bodies."""
    out = []
    for line in source.splitlines():
        found = re.match(r"^(\s*)raise NotImplementedError\('([\w.]+) in ", line)
        if found and found.group(2) in bodies:
            body = textwrap.dedent(bodies[found.group(2)])
            out += [found.group(1) + row if row else row for row in body.splitlines()]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def renamed(source: str) -> str:
    """Every name the student chose renamed, the layout redone, comments gone (as a student
    hiding a copy would)."""
    tree = ast.parse(source)
    kept = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    chosen = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    } | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    names = {name: f"my_{name.lower()}_{i}" for i, name in enumerate(sorted(chosen - kept))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
        elif isinstance(node, ast.arg) and node.arg in names:
            node.arg = names[node.arg]
    return ast.unparse(tree) + "\n"


def padded(source: str) -> str:
    """A no-op assignment after every statement: ``x = x`` after one that sets ``x``, else
    ``unused = 0``."""

    def pad(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in body:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field, None)
                if inner and isinstance(inner[0], ast.stmt):
                    setattr(statement, field, pad(inner))
            out.append(statement)
            target = statement.targets[0] if isinstance(statement, ast.Assign) else None
            name = target.id if isinstance(target, ast.Name) else "unused"
            noop = f"{name} = {name}" if isinstance(target, ast.Name) else "unused = 0"
            out.append(ast.parse(noop).body[0])
        return out

    tree = ast.parse(source)
    tree.body = pad(tree.body)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def make_class(lesson: str) -> dict[str, str]:
    """The lesson's submissions: student -> lesson module."""
    reference = (ROOT / "solutions" / f"{_module(lesson)}.py").read_text()
    own = {student: implement(stub(lesson), bodies) for student, bodies in OWN[lesson].items()}
    first = next(iter(OWN[lesson]["alex"]))
    one_line = implement(stub(lesson), {first: next(iter(_reference_lines(lesson, first)))})
    return {
        **dict.fromkeys(REFERENCE, reference),
        **own,
        "rita": renamed(own["alex"]),  # alex's, renamed
        "pete": padded(own["bea"]),  # bea's, padded
        "pat": one_line,  # one line of the reference, the rest the stub
    }


def _reference_lines(lesson: str, function: str) -> list[str]:
    reference = (ROOT / "solutions" / f"{_module(lesson)}.py").read_text()
    node = next(
        n
        for n in ast.parse(reference).body
        if isinstance(n, ast.FunctionDef) and n.name == function
    )
    return [ast.unparse(s) for s in node.body if not isinstance(s, ast.Expr)]


@pytest.mark.parametrize("lesson", LESSONS)
def test_copies_rank_first_and_common_code_is_not_flagged(lesson):
    from instructor.similarity import DISPLAY_AT, course_code, rank

    sources = make_class(lesson)
    assert sources["rita"] != sources["alex"] and sources["pete"] != sources["bea"]
    pairs = rank(sources, stub(lesson), course_code())
    assert len(pairs) == len(sources) * (len(sources) - 1) // 2
    top = {frozenset((p.first, p.second)) for p in pairs[:2]}
    shown = [(p.first, p.second, round(p.share, 2)) for p in pairs[:6]]
    assert top == {frozenset(("alex", "rita")), frozenset(("bea", "pete"))}, shown
    assert all(p.share > 0.6 for p in pairs[:2]), shown
    flagged = [p for p in pairs if p.share >= DISPLAY_AT]
    assert len(flagged) == 2, shown  # not the reference's word-for-word writers
    partial = max(p.share for p in pairs if "pat" in (p.first, p.second))
    assert partial < 0.2, shown


# Two correct attention modules written apart, each the way the chapter teaches it: the same
# idioms in the order the algorithm sets (scores, mask, softmax, values), little else alike.
APART = {
    "eli": {
        "causal_mask": "return torch.ones(T, T).tril().bool()",
        "attention": """\
            d = k.shape[-1]
            w = q @ k.transpose(-2, -1) / math.sqrt(d)
            if mask is not None:
                w = w.masked_fill(mask.logical_not(), float("-inf"))
            w = torch.softmax(w, dim=-1)
            return w @ v""",
    },
    "gus": {
        "causal_mask": "return torch.tril(torch.ones(T, T, dtype=torch.bool))",
        "attention": """\
            dk = q.shape[-1]
            scores = q @ k.transpose(-2, -1)
            scores = scores / math.sqrt(dk)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            return probs @ v""",
    },
}


def _load(source: str, name: str):
    import importlib.util

    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


def test_two_correct_answers_written_apart_are_no_pair_and_a_renamed_copy_is():
    """What two honest solutions share because both students read the course (the stub, the
    reference's unavoidable lines, the chapter's idioms) counts for no pair: without the
    course's code the two would be flagged, with it they are not, and a renamed copy of a
    third student's work still ranks first."""
    import torch

    from instructor.similarity import DISPLAY_AT, course_code, rank
    from solutions import attention as reference

    lesson = "attention"
    apart = {s: implement(stub(lesson), bodies) for s, bodies in APART.items()}
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
    for student, source in apart.items():  # both correct
        module = _load(source, f"attention_{student}")
        assert torch.equal(module.causal_mask(5), reference.causal_mask(5)), student
        got = module.attention(q, k, v, reference.causal_mask(5))
        assert torch.allclose(got, reference.attention(q, k, v, reference.causal_mask(5)))
    alex = implement(stub(lesson), OWN[lesson]["alex"])
    sources = {**apart, "alex": alex, "rita": renamed(alex), "sam": stub(lesson)}

    def share(pairs, first, second):
        return next(p.share for p in pairs if {p.first, p.second} == {first, second})

    assert share(rank(sources, stub(lesson)), "eli", "gus") >= DISPLAY_AT  # the false pair
    pairs = rank(sources, stub(lesson), course_code())
    shown = [(p.first, p.second, round(p.share, 2)) for p in pairs[:4]]
    assert {pairs[0].first, pairs[0].second} == {"alex", "rita"} and pairs[0].share > 0.9, shown
    assert share(pairs, "eli", "gus") < DISPLAY_AT / 1.5, shown
    assert [p for p in pairs if p.share >= DISPLAY_AT] == pairs[:1], shown


def test_the_course_code_is_every_reference_and_every_chapter_example():
    from instructor.similarity import course_code

    code = course_code()
    reference = (ROOT / "solutions" / "attention.py").read_text()
    assert reference in code
    assert any("masked_fill(~causal_mask(4)" in block for block in code)  # a chapter's example
    assert not any(block.lstrip().startswith("```") for block in code)


def test_no_op_statements_names_and_literals_are_normalised_away():
    from instructor.similarity import normalise

    plain = normalise("def f(a):\n    b = a * 2\n    return b\n", {"f"})
    noisy = normalise(
        "def f(x):  # mine\n    '''doc'''\n    pass\n    y = x * 3\n    y = y\n"
        "    spare = 0\n    y += 0\n    return y\n",
        {"f"},
    )
    assert [t for t, _ in plain] == [t for t, _ in noisy]
    assert "f" in [t for t, _ in plain] and "a" not in [t for t, _ in plain]
    # An attribute keeps its name even when a variable has the same one.
    assert "shape" in [t for t, _ in normalise("shape = 1\nx = t.shape\nprint(x, shape)\n")]


def test_report_explains_its_percentages_and_escapes_the_code(tmp_path):
    from instructor.course import PACKAGE, Course
    from instructor.similarity import compare

    lesson = "attention"
    course = Course.at(tmp_path / "course")
    (course.source / lesson / PACKAGE).mkdir(parents=True)
    (course.source / lesson / PACKAGE / f"{_module(lesson)}.py").write_text(stub(lesson))
    sources = make_class(lesson)
    sources["alex"] += "# </pre><script>alert(1)</script>\n"
    sources["sam"] = sources["sid"] = stub(lesson)  # the stub, untouched: boilerplate
    for student, source in sources.items():
        folder = course.submitted / student / lesson / PACKAGE
        folder.mkdir(parents=True)
        (folder / f"{_module(lesson)}.py").write_text(source)
    path, pairs = compare(course, lesson)
    assert path == course.root / "reports" / f"similarity-{lesson}.html"
    assert {pairs[0].first, pairs[0].second} in ({"alex", "rita"}, {"bea", "pete"})
    assert next(p.share for p in pairs if {p.first, p.second} == {"sam", "sid"}) == 0
    page = path.read_text()
    assert "For instructors only" in page and "How to read the percentages" in page
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert page.count("<section id='pair-") == 2
    assert "<mark>" in page


def test_a_students_name_and_code_are_escaped_in_the_page():
    from instructor.similarity import Pair, render_html

    hostile = "<script>alert('x')</script> & co"
    sources = {hostile: f"x = 1  # {hostile}\ny = 2\n", "bea": "x = 1\n"}
    page = render_html("attention", sources, [Pair(hostile, "bea", 0.9, {hostile: [1]})])
    assert "<script>" not in page and "& co" not in page
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"
    assert f"<mark>x = 1  # {escaped}</mark>\ny = 2</pre>" in page  # the code's lines as written
    assert f"<h3>{escaped}</h3>" in page and f"{escaped} and bea</a>" in page
