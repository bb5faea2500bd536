"""Citations stay inside the repository, every `docs/<page>.md#anchor` cited resolves, and every
relative link of README.md and docs/*.md reaches a file of the repository.

A user of minikafka has the repository, not the team's private notes: no file under the scanned
trees may cite `REFERENCE.md`, `DESIGN.md` or a shared folder beside the repository. A citation of a
docs page (there and in tests/, this file's planted faults aside) must name a page that exists and,
with an anchor, a heading of that page whose GitHub slug is the anchor (GitHub's rule: lower case,
punctuation other than `-` and `_` dropped, spaces to `-`, `-1`, `-2`... for repeated headings).
Pages' own `](#anchor)` links are held to the same rule. `docs/throttling.md`'s section anchors are
fixed: code, tests and other pages cite them. A markdown link `](path#anchor)` in README.md or a
docs page, outside code, is relative to its page: the path must be a file or folder of the
repository and the anchor, if any, a heading of that file (URLs are not followed).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("minikafka", "tools", "cluster", "systemtests", "benchmarks", "docs", "README.md")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".json", ".yaml", ".yml", ".cfg", ".ini", ".sh"}
OUTSIDE = re.compile(r"REFERENCE\.md|DESIGN\.md|\.\./shared")
DOC_CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
PAGE_LINK = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # https:, mailto: ...

# The anchors of docs/throttling.md that others cite, fixed: renaming a heading breaks them.
THROTTLING_ANCHORS = (
    "configs",
    "the-replication-throttle",
    "overshoot",
    "in-sync-replicas-are-exempt-kafka-4313",
    "what-each-side-charges",
    "measuring-a-rate",
    "reassignment-throttles-kip-542-a-proposal",
    "broker-wide-throttles-kip-1009-a-proposal",
    "client-quotas-kip-13-and-throttle-time-kip-219",
    "the-reassignment-tool",
    "metrics",
    "the-operators-arithmetic",
)


def github_slug(heading: str) -> str:
    """GitHub's heading anchor: markup and punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays, its target not
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a page (outside code fences), repeats numbered as GitHub does."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m is None:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def scanned_files(trees: tuple[str, ...] = SCANNED) -> list[Path]:
    files: list[Path] = []
    for name in trees:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts
            )
    return [p for p in files if p != Path(__file__).resolve()]  # its planted faults aside


def outside_citations(files: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()[:120]}")
    return found


def broken_doc_citations(files: list[Path], docs: Path, root: Path = ROOT) -> list[str]:
    """Citations of docs pages that do not resolve, as `file:line: citation (why)`."""
    pages: dict[str, set[str] | None] = {}

    def page_anchors(page: str) -> set[str] | None:
        if page not in pages:
            path = docs / page
            pages[page] = anchors(path.read_text(encoding="utf-8")) if path.is_file() else None
        return pages[page]

    broken = []
    for path in files:
        in_docs = path.parent == docs and path.suffix == ".md"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(root)}:{n}"
            cited = [(m.group(1), m.group(2)) for m in DOC_CITATION.finditer(line)]
            if in_docs:
                cited += [(path.name, m.group(1)) for m in PAGE_LINK.finditer(line)]
            for page, anchor in cited:
                known = page_anchors(page)
                if known is None:
                    broken.append(f"{where}: docs/{page} (no such page)")
                elif anchor is not None and anchor not in known:
                    broken.append(f"{where}: docs/{page}#{anchor} (no heading with that slug)")
    return broken


def broken_relative_links(pages: list[Path], root: Path = ROOT) -> list[str]:
    """Relative markdown links of `pages` that do not resolve, as `page:line: target (why)`."""
    broken = []
    for page in pages:
        fenced = False
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            for m in MD_LINK.finditer(CODE_SPAN.sub("", line)):
                target = m.group(1)
                if URL.match(target):
                    continue
                where = f"{page.relative_to(root)}:{n}: {target}"
                path_part, _, anchor = target.partition("#")
                path = (page.parent / path_part).resolve() if path_part else page
                if not path.is_relative_to(root.resolve()):
                    broken.append(f"{where} (outside the repository)")
                elif not path.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and (
                    path.suffix != ".md" or anchor not in anchors(path.read_text(encoding="utf-8"))
                ):
                    broken.append(f"{where} (no heading with that slug)")
    return broken


def markdown_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("In-sync replicas are exempt (KAFKA-4313)", "in-sync-replicas-are-exempt-kafka-4313"),
        ("The operator's arithmetic", "the-operators-arithmetic"),
        (
            "Client quotas (KIP-13) and throttle time (KIP-219)",
            "client-quotas-kip-13-and-throttle-time-kip-219",
        ),
        ("`replica.fetch.max.bytes`, per partition", "replicafetchmaxbytes-per-partition"),
        ("snake_case stays", "snake_case-stays"),
    ],
)
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug


def test_anchors_number_repeats_and_skip_code_fences():
    page = "# A\n## A\n```\n# not a heading\n```\n### B (c)\n"
    assert anchors(page) == {"a", "a-1", "b-c"}


def test_the_checks_catch_what_they_name(tmp_path):
    """Each check reports a planted fault: a private citation, a missing page, a missing
    anchor, a page's own broken link; and passes a good citation."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n## Good one\nsee [x](#good-one), [y](#gone)\n")
    src = tmp_path / "src.py"
    src.write_text(
        "# docs/page.md#good-one is fine\n"
        "# see REFERENCE.md section 2\n"
        "# docs/nope.md#x\n"
        "# docs/page.md#bad-one\n"
    )
    files = [src, docs / "page.md"]
    assert outside_citations(files, tmp_path) == ["src.py:2: # see REFERENCE.md section 2"]
    assert broken_doc_citations(files, docs, tmp_path) == [
        "src.py:3: docs/nope.md (no such page)",
        "src.py:4: docs/page.md#bad-one (no heading with that slug)",
        "docs/page.md:3: docs/page.md#gone (no heading with that slug)",
    ]


def test_throttling_page_has_the_cited_sections():
    found = anchors((ROOT / "docs" / "throttling.md").read_text(encoding="utf-8"))
    missing = [a for a in THROTTLING_ANCHORS if a not in found]
    assert not missing, f"docs/throttling.md lost the sections others cite: {missing}"


def test_no_citation_points_outside_the_repository():
    found = outside_citations(scanned_files())
    assert not found, (
        "cite docs/<page>.md#anchor, a KIP or a Kafka class instead of files users do not have:\n"
        + "\n".join(found)
    )


def test_every_docs_citation_resolves():
    # tests/ too: their docstrings cite the docs as much as the code does.
    broken = broken_doc_citations(scanned_files((*SCANNED, "tests")), ROOT / "docs")
    assert not broken, "citations of docs pages that do not resolve:\n" + "\n".join(broken)


def test_the_link_check_catches_what_it_names(tmp_path):
    """Planted faults: a missing file, a missing anchor, a link leaving the repository, a missing
    anchor of the page itself; and a good page link, folder, URL and fenced link pass."""
    root = tmp_path / "repo"
    docs = root / "docs"
    docs.mkdir(parents=True)
    (root / "tools").mkdir()
    (docs / "page.md").write_text(
        "# Page\n## Good one\n"
        "[a](../README.md#top) [b](other.md) [c](#good-one) [d](../tools/)\n"
        "[e](https://kafka.apache.org/documentation/#quotas) `[f](nope.md)`\n"
        "```\n[g](gone.md)\n```\n"
        "[h](../README.md#nowhere) [i](../../outside.md) [j](#gone)\n"
    )
    (root / "README.md").write_text("# Top\nsee [docs](docs/page.md#good-one), [x](docs/x.md)\n")
    assert broken_relative_links(markdown_pages(root), root) == [
        "README.md:2: docs/x.md (no such file)",
        "docs/page.md:3: other.md (no such file)",
        "docs/page.md:8: ../README.md#nowhere (no heading with that slug)",
        "docs/page.md:8: ../../outside.md (outside the repository)",
        "docs/page.md:8: #gone (no heading with that slug)",
    ]


def test_every_relative_link_of_the_pages_resolves():
    broken = broken_relative_links(markdown_pages())
    assert not broken, "relative links of README.md and docs/ that do not resolve:\n" + "\n".join(
        broken
    )
