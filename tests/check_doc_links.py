#!/usr/bin/env python3
"""Checks the relative links of mpify's documentation.

  python3 tests/check_doc_links.py <repository root>

Scans README.md, CONTRIBUTING.md, CHANGELOG.md, docs/*.md, benchmarks/README.md and
tests/README.md for Markdown links and images, [text](target) and ![alt](target), and for
reference definitions, [name]: target. A target with a scheme (https:, mailto:, ...) is left
alone. A relative target must name a file or folder that exists, relative to the file that
holds the link (or to the repository's root when it starts with '/'), inside the repository.
A '#anchor' must match a heading of the target Markdown file, as GitHub makes anchors of
headings (lowercase, spaces to '-', punctuation other than '-' and '_' dropped, '-1', '-2'
for repeated headings); a bare '#anchor' refers to the file itself. Links in fenced code
blocks, in inline code and in HTML comments do not count.

Every page of docs/ must also be linked from the manual's index, docs/README.md, and every
public header (include/mpify/*.hpp) must have its page in the reference, docs/reference/,
linked from the reference's index: what is missing is reported as `INDEX: page.md — not in
the index`.

Exits 1 listing each broken link as `file:line: target — why`, 0 when every link resolves.
Standard library only.
"""
import os
import re
import sys
import urllib.parse
from pathlib import Path

DOCUMENTS = [
    "README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md", "docs/reference/*.md", "benchmarks/README.md",
    "tests/README.md",
]
MARKDOWN_SUFFIXES = {".md", ".markdown"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ID = re.compile(r"<a\s[^>]*?(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
# [text](target "title") and ![alt](target): the text may hold one level of brackets and
# run over several lines; the target may hold one level of parentheses, or be <bracketed>.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]"
    r"\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[(?:[^\[\]\\]|\\.)+\]:[ \t]*(<[^<>\n]*>|\S+)", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
SOURCE_LINE_ANCHOR = re.compile(r"^L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?$")


def blank(text):
    """The same text with every character but newlines made a space (positions are kept)."""
    return re.sub(r"[^\n]", " ", text)


def mask_blocks(text):
    """The text with fenced code blocks and HTML comments blanked out, so that what they hold
    is not read as headings or links. Line numbers stay as they are."""
    lines = text.split("\n")
    out = []
    fence = None  # the opening fence's character and length while inside a block
    for line in lines:
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = (match.group(1)[0], len(match.group(1)))
                out.append(blank(line))
            else:
                out.append(line)
        else:
            closing = re.match(r"^ {0,3}(`{3,}|~{3,})[ \t]*$", line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= fence[1]:
                fence = None
            out.append(blank(line))
    masked = "\n".join(out)
    return re.sub(r"<!--.*?-->", lambda m: blank(m.group(0)), masked, flags=re.DOTALL)


def mask_code(text):
    """mask_blocks, and inline code spans blanked out too (a run of backticks up to the same
    run, not across a blank line): what is left is where links can be."""
    masked = mask_blocks(text)
    return re.sub(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", lambda m: blank(m.group(0)), masked, flags=re.DOTALL)


def heading_text(raw):
    """The text GitHub renders for a heading's Markdown: code spans, links, images and emphasis
    reduced to their words."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # links and images: their text
    text = re.sub(r"(`+)(.+?)\1", r"\2", text)  # code spans: their content
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"\*+", "", text)  # emphasis with asterisks
    text = re.sub(r"(?<!\w)_+(?=\S)|(?<=\S)_+(?!\w)", "", text)  # emphasis with underscores
    return text.strip()


def slug(text):
    """GitHub's anchor of a heading's text."""
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(text):
    """The raw text of every ATX and setext heading outside code blocks, in order."""
    lines = mask_blocks(text).split("\n")
    found = []
    for index, line in enumerate(lines):
        match = ATX_HEADING.match(line)
        if match:
            found.append(match.group(2) or "")
            continue
        if index > 0 and SETEXT_UNDERLINE.match(line) and lines[index - 1].strip():
            previous = lines[index - 1]
            if not ATX_HEADING.match(previous) and not FENCE.match(previous):
                # A '---' under a paragraph line makes it a heading; under a list item it
                # does not, which this ignores (a false anchor is harmless here).
                found.append(previous.strip())
    return found


class Anchors:
    """The anchors each Markdown file offers, read once."""

    def __init__(self):
        self.cache = {}

    def of(self, path):
        if path not in self.cache:
            text = path.read_text(encoding="utf-8")
            anchors = set()
            seen = {}
            for raw in headings(text):
                base = slug(heading_text(raw))
                count = seen.get(base, 0)
                seen[base] = count + 1
                anchors.add(base if count == 0 else f"{base}-{count}")
            anchors.update(match.group(1) for match in HTML_ID.finditer(mask_blocks(text)))
            self.cache[path] = anchors
        return self.cache[path]


def links(text):
    """(line, target) of every link, image and reference definition outside code."""
    masked = mask_code(text)
    masked = re.sub(r"\\[\[\]()]", "  ", masked)  # escaped brackets are text
    for pattern in (INLINE_LINK, REFERENCE_DEFINITION):
        for match in pattern.finditer(masked):
            target = match.group(1).strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1].strip()
            line = masked.count("\n", 0, match.start(1)) + 1
            yield line, target


def check_target(document, target, root, anchors):
    """Why the link `target` in `document` is broken, or None."""
    if not target:
        return "an empty target"
    if SCHEME.match(target) or target.startswith("//"):
        return None  # another site, or mailto: and the like
    path_part, _, anchor = target.partition("#")
    path_part = urllib.parse.unquote(path_part.split("?", 1)[0])
    anchor = urllib.parse.unquote(anchor)
    if path_part == "":
        resolved = document
    elif path_part.startswith("/"):
        resolved = root / path_part.lstrip("/")
    else:
        resolved = document.parent / path_part
    resolved = Path(os.path.normpath(resolved))
    try:
        resolved.relative_to(root)
    except ValueError:
        return "points outside the repository"
    if not resolved.exists():
        return f"no such file or folder ({resolved.relative_to(root)})"
    if not anchor:
        return None
    markdown = resolved
    if resolved.is_dir():
        markdown = resolved / "README.md"
        if not markdown.is_file():
            return "an anchor on a folder without README.md"
    if markdown.suffix.lower() not in MARKDOWN_SUFFIXES:
        if SOURCE_LINE_ANCHOR.match(anchor):
            return None
        return f"an anchor on a file that is not Markdown ({markdown.relative_to(root)})"
    offered = anchors.of(markdown)
    if anchor in offered:
        return None
    near = [a for a in offered if a.lower() == anchor.lower()]
    if near:
        return f"no heading with anchor #{anchor} in {markdown.relative_to(root)} (did you mean #{near[0]}?)"
    return f"no heading with anchor #{anchor} in {markdown.relative_to(root)}"


def documents(root):
    found = []
    for pattern in DOCUMENTS:
        found.extend(sorted(path for path in root.glob(pattern) if path.is_file()))
    return found


def pages_missing_from_index(index, pages):
    """The names of `pages` (paths) that the Markdown file `index` does not link to."""
    linked = set()
    for _, target in links(index.read_text(encoding="utf-8")) if index.is_file() else []:
        path_part = urllib.parse.unquote(target.partition("#")[0])
        if path_part and not SCHEME.match(path_part):
            linked.add(Path(os.path.normpath(index.parent / path_part)))
    return [page.name for page in pages if page not in linked]


def main(argv):
    if len(argv) != 2:
        print("usage: python3 tests/check_doc_links.py <repository root>", file=sys.stderr)
        return 2
    root = Path(os.path.abspath(argv[1]))
    files = documents(root)
    if not (root / "README.md").is_file():
        print(f"{root}: no README.md here: is this the repository's root?", file=sys.stderr)
        return 2
    anchors = Anchors()
    broken = []
    checked = 0
    for document in files:
        text = document.read_text(encoding="utf-8")
        for line, target in links(text):
            checked += 1
            why = check_target(document, target, root, anchors)
            if why:
                broken.append(f"{document.relative_to(root)}:{line}: {target} — {why}")
    manual = sorted(path for path in (root / "docs").glob("*.md") if path.name != "README.md")
    for page in pages_missing_from_index(root / "docs" / "README.md", manual):
        broken.append(f"docs/README.md: {page} — not in the index")
    reference = [root / "docs" / "reference" / f"{h.stem}.md" for h in sorted((root / "include" / "mpify").glob("*.hpp"))]
    for page in pages_missing_from_index(root / "docs" / "reference" / "README.md", reference):
        broken.append(f"docs/reference/README.md: {page} — not in the index (python3 scripts/reference.py)")
    for entry in broken:
        print(entry)
    if broken:
        print(f"{len(broken)} broken link(s) of {checked} in {len(files)} files", file=sys.stderr)
        return 1
    print(f"{checked} links in {len(files)} files: all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
