#!/usr/bin/env python3
"""Generates the API reference, docs/reference/, from the comments of the public headers.

  python3 scripts/reference.py           writes docs/reference/ (a page per header of include/mpify/)
  python3 scripts/reference.py --check   writes nothing; fails when docs/reference/ is not what the
                                         headers make, when Doxygen warns, or when a public
                                         declaration has no comment

Doxygen (Debian's doxygen package) reads the headers and writes its XML; this script turns
that into Markdown: each page opens with the header's own opening comment, then every
declaration of namespace mpify (and mpify::ddp) and every public macro that the header holds,
in the order the header declares them, each with its comment. What lives in namespace detail,
and what the headers add to other libraries' namespaces (Boost's serializers of std types), is
not part of the reference. Exits 77 when doxygen is missing (the test suite counts that as
skipped), 1 on a failed check, 0 otherwise. Standard library only.
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ROOT / "include" / "mpify"
OUT = ROOT / "docs" / "reference"
PUBLIC_NAMESPACES = ("mpify", "mpify::ddp", "mpify::learner")
# The folders of public headers under include/mpify/ (not detail/): the core's, the Learner's.
HEADER_FOLDERS = (HEADERS, HEADERS / "learner")
# Macros that exist only to build others (token pasting, stringizing) or the ABI's plumbing.
INTERNAL_MACRO = re.compile(r"(^MPIFY_DETAIL_|_$|^MPIFY_ABI_(CONCAT|STRINGIFY))")

DOXYFILE = """
PROJECT_NAME = mpify
INPUT = {headers}
FILE_PATTERNS = *.hpp
RECURSIVE = NO
STRIP_FROM_PATH = {root}
OUTPUT_DIRECTORY = {out}
GENERATE_HTML = NO
GENERATE_LATEX = NO
GENERATE_XML = YES
XML_PROGRAMLISTING = NO
EXTRACT_ALL = NO
WARN_IF_UNDOCUMENTED = YES
WARN_NO_PARAMDOC = NO
WARN_LOGFILE = {out}/warnings.txt
QUIET = YES
JAVADOC_AUTOBRIEF = YES
# Doxygen drops a % before a word (its "do not link this" mark): the comments' %H means %H.
INPUT_FILTER = "sed -e 's/%\\([A-Za-z]\\)/%%\\1/g'"
EXCLUDE_SYMBOLS = detail boost std torch
ENABLE_PREPROCESSING = YES
MACRO_EXPANSION = YES
EXPAND_ONLY_PREDEF = YES
PREDEFINED = MPIFY_API= "MPIFY_BEGIN_NAMESPACE=namespace mpify {{" "MPIFY_END_NAMESPACE=}}" \\
             "MPIFY_BEGIN_DETAIL_NAMESPACE=namespace mpify {{ namespace detail {{" \\
             "MPIFY_END_DETAIL_NAMESPACE=}} }}" "TORCH_MODULE(name)="
"""


def text_of(element):
    """The Markdown of a Doxygen description element (briefdescription, a para, ...)."""
    if element is None:
        return ""
    blocks = []
    for para in element.findall("para"):
        blocks.extend(para_blocks(para))
    return "\n\n".join(block for block in blocks if block.strip())


def para_blocks(para):
    """A <para> as Markdown blocks: its running text, and the lists and code it holds."""
    blocks = []
    running = [para.text or ""]

    def flush():
        line = re.sub(r"\s+", " ", "".join(running)).strip()
        if line:
            blocks.append(line)
        running.clear()

    for child in para:
        if child.tag == "itemizedlist" or child.tag == "orderedlist":
            flush()
            items = []
            for number, item in enumerate(child.findall("listitem"), 1):
                mark = f"{number}." if child.tag == "orderedlist" else "-"
                body = text_of(item).replace("\n\n", "\n").replace("\n", "\n  ")
                items.append(f"{mark} {body}")
            blocks.append("\n".join(items))
        elif child.tag in ("programlisting", "verbatim"):
            flush()
            blocks.append("```cpp\n" + code_of(child).rstrip() + "\n```")
        elif child.tag == "simplesect":
            flush()
            title = {"return": "Returns", "see": "See", "note": "Note", "warning": "Warning"}.get(child.get("kind"), "")
            blocks.append((f"{title}: " if title else "") + text_of(child))
        elif child.tag == "parameterlist":
            flush()
            for item in child.findall("parameteritem"):
                names = ", ".join(f"`{n.text}`" for n in item.iter("parametername"))
                blocks.append(f"{names}: {text_of(item.find('parameterdescription'))}")
        else:
            running.append(inline(child))
        running.append(child.tail or "")
    flush()
    return blocks


def inline(element):
    """An inline element (code, emphasis, a reference, a link) as Markdown."""
    inner = (element.text or "") + "".join(inline(child) + (child.tail or "") for child in element)
    if element.tag == "computeroutput":
        return f"`{inner}`"
    if element.tag == "emphasis":
        return f"*{inner}*"
    if element.tag == "bold":
        return f"**{inner}**"
    if element.tag == "ulink":
        return f"[{inner}]({element.get('url')})"
    if element.tag == "linebreak":
        return " "
    if element.tag == "sp":
        return " "
    return inner


def code_of(element):
    """The text of a program listing, line by line."""
    if element.tag == "verbatim":
        return element.text or ""
    lines = []
    for codeline in element.findall("codeline"):
        lines.append("".join(code_text(part) for part in codeline))
    return "\n".join(lines)


def code_text(element):
    if element.tag == "sp":
        return " " + (element.tail or "")
    return (element.text or "") + "".join(code_text(child) for child in element) + (element.tail or "")


def plain(element):
    return "".join(element.itertext()) if element is not None else ""


def header_comment(path):
    """The opening comment of a header, after `#pragma once`, as Markdown: prose as paragraphs,
    lines indented in the comment as a code block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comment = []
    for line in lines[1:] if lines and lines[0].startswith("#pragma once") else lines:
        if not line.startswith("//"):
            break
        comment.append(line[2:][1:] if line[2:].startswith(" ") else line[2:])
    blocks, prose, code = [], [], []
    for line in comment + [""]:
        if line.startswith("  ") and line.strip():
            if prose:
                blocks.append(" ".join(prose))
                prose = []
            code.append(line[2:])
            continue
        if code:
            blocks.append("```cpp\n" + "\n".join(code).rstrip() + "\n```")
            code = []
        if line.strip():
            prose.append(line.strip())
        elif prose:
            blocks.append(" ".join(prose))
            prose = []
    return "\n\n".join(blocks)


class Declaration:
    """One thing a header declares: where, its signature, its comment."""

    def __init__(self, file, line, heading, signature, comment, members=()):
        self.file, self.line = file, line
        self.heading, self.signature, self.comment = heading, signature, comment
        self.members = list(members)


def location(element):
    """The header (its path under include/mpify/, e.g. learner/learner.hpp) and the line."""
    spot = element.find("location")
    file = Path(spot.get("file"))
    return file.relative_to(HEADERS).as_posix() if file.is_absolute() else file.relative_to("include/mpify").as_posix(), \
        int(spot.get("line", "0"))


def template_prefix(element):
    params = element.find("templateparamlist")
    if params is None:
        return ""
    parts = []
    for param in params.findall("param"):
        text = plain(param.find("type")).strip()
        name = plain(param.find("declname")).strip()
        default = plain(param.find("defval")).strip()
        parts.append(" ".join(p for p in (text, name) if p) + (f" = {default}" if default else ""))
    return "template <" + ", ".join(parts) + ">\n"


def signature_of(member):
    """The declaration of a member as C++ a reader would write."""
    kind = member.get("kind")
    name = member.findtext("name")
    if kind == "define":
        params = [plain(p.find("defname")) for p in member.findall("param")]
        return f"#define {name}" + (f"({', '.join(params)})" if member.find("param") is not None else "")
    if kind == "enum":
        strong = "enum class" if member.get("strong") == "yes" else "enum"
        values = ", ".join(v.findtext("name") for v in member.findall("enumvalue"))
        return f"{strong} {name} {{ {values} }};"
    if kind == "typedef":  # Doxygen writes an alias "using X = typedef T"
        return plain(member.find("definition")).replace(" = typedef ", " = ", 1) + ";"
    definition = plain(member.find("definition")).strip()
    definition = re.sub(r"\b(mpify::)+(?=\w)", "", definition)
    args = plain(member.find("argsstring")).strip()
    initializer = plain(member.find("initializer")).strip()
    if initializer and not initializer.startswith("="):
        initializer = " " + initializer
    static = "static " if member.get("static") == "yes" and not definition.startswith("static") else ""
    return template_prefix(member) + static + definition + args + (f" {initializer}" if initializer.startswith("=") else initializer) + ";"


def comment_of(element):
    """A declaration's comment; for an enum, followed by each value's."""
    parts = [text_of(element.find("briefdescription")), text_of(element.find("detaileddescription"))]
    values = []
    for value in element.findall("enumvalue"):
        said = comment_of(value).replace("\n\n", " ")
        if said:
            values.append(f"- `{value.findtext('name')}`: {said}")
    return "\n\n".join(part for part in parts + ["\n".join(values)] if part)


def member_declarations(compound):
    """The documented-or-not public members of a namespace, class or file compound."""
    found = []
    for section in compound.findall("sectiondef"):
        for member in section.findall("memberdef"):
            if member.get("prot", "public") != "public":
                continue
            if member.get("kind") == "define" and INTERNAL_MACRO.search(member.findtext("name")):
                continue
            if member.get("kind") == "friend" or plain(member.find("argsstring")).replace(" ", "").endswith("=delete"):
                continue  # a deleted copy says what it is
            file, line = location(member)
            found.append(Declaration(file, line, member.findtext("name"), signature_of(member), comment_of(member)))
    return found


def class_declaration(compound):
    name = compound.findtext("compoundname")
    short = re.sub(r"^(mpify::(ddp::)?)", "", name)
    kind = compound.get("kind")
    bases = [f"{b.get('prot')} {plain(b)}" for b in compound.findall("basecompoundref")]
    signature = template_prefix(compound) + f"{kind} {short}" + (f" : {', '.join(bases)}" if bases else "")
    file, line = location(compound)
    members = member_declarations(compound)
    return Declaration(file, line, short, signature, comment_of(compound), sorted(members, key=lambda d: d.line))


def read_declarations(xml_dir):
    """Every public declaration of the headers, by header file name."""
    by_file = {}
    index = ET.parse(xml_dir / "index.xml").getroot()
    for entry in index.findall("compound"):
        kind, name = entry.get("kind"), entry.findtext("name")
        compound = ET.parse(xml_dir / f"{entry.get('refid')}.xml").getroot().find("compounddef")
        if kind == "namespace" and name in PUBLIC_NAMESPACES:
            declarations = member_declarations(compound)
            if name != "mpify":
                for d in declarations:
                    d.heading = f"{name.split('::', 1)[1]}::{d.heading}"
        elif kind in ("class", "struct", "union") and name.startswith("mpify::") and "::detail" not in name \
                and "<" not in name:
            declarations = [class_declaration(compound)]
        elif kind == "file":
            declarations = [d for d in member_declarations(compound) if d.signature.startswith("#define")]
        else:
            continue
        for declaration in declarations:
            by_file.setdefault(declaration.file, []).append(declaration)
    return by_file


def page_name(header):
    """The page of a header: learner/learner.hpp's is learner/learner.md."""
    return header.relative_to(HEADERS).with_suffix(".md").as_posix()


def render_page(header, declarations):
    index = "../" * page_name(header).count("/") + "README.md"
    lines = [f"# `<mpify/{header.relative_to(HEADERS).as_posix()}>`", "", f"[The reference]({index}) · generated from the header by "
             "`scripts/reference.py`: edit the header's comments, not this page.", ""]
    opening = header_comment(header)
    if opening:
        lines += [opening, ""]
    for d in sorted(declarations, key=lambda d: d.line):
        lines += [f"## `{d.heading}`", "", "```cpp", d.signature, "```", ""]
        if d.comment:
            lines += [d.comment, ""]
        for m in d.members:
            lines += [f"### `{d.heading}::{m.heading}`", "", "```cpp", m.signature, "```", ""]
            if m.comment:
                lines += [m.comment, ""]
    return "\n".join(lines).rstrip() + "\n"


def first_sentence(text):
    """The first sentence of a header's opening comment, for the index."""
    prose = re.sub(r"\s+", " ", text.split("\n\n")[0]) if text else ""
    match = re.match(r"(.+?\.)(\s|$)", prose)
    return match.group(1) if match else prose


def render_index(headers):
    lines = ["# The reference", "", "A page per public header of `include/mpify/`, generated from the headers' own "
             "comments by `scripts/reference.py` (Doxygen). The [manual](../README.md) explains; these pages list "
             "every declaration.", "", "| header | what it holds |", "|---|---|"]
    for header in headers:
        lines.append(f"| [`<mpify/{header.relative_to(HEADERS).as_posix()}>`]({page_name(header)}) | "
                     f"{first_sentence(header_comment(header))} |")
    return "\n".join(lines) + "\n"


def undocumented(by_file):
    missing = []
    for file, declarations in by_file.items():
        for d in declarations:
            if not d.comment:
                missing.append(f"include/mpify/{file}:{d.line}: {d.heading} has no comment")
            for m in d.members:
                if not m.comment:
                    missing.append(f"include/mpify/{file}:{m.line}: {d.heading}::{m.heading} has no comment")
    return missing


def generate(scratch):
    """The pages, by file name, and the problems found (Doxygen's warnings, undocumented names)."""
    doxyfile = scratch / "Doxyfile"
    doxyfile.write_text(DOXYFILE.format(headers=" ".join(str(folder) for folder in HEADER_FOLDERS), root=ROOT,
                                        out=scratch), encoding="utf-8")
    run = subprocess.run(["doxygen", str(doxyfile)], capture_output=True, text=True)
    problems = []
    if run.returncode != 0:
        problems.append(f"doxygen failed: {run.stderr.strip()}")
        return {}, problems
    warnings = (scratch / "warnings.txt").read_text(encoding="utf-8").strip()
    problems += [line for line in warnings.splitlines() if line.strip()]
    by_file = read_declarations(scratch / "xml")
    problems += undocumented(by_file)
    headers = [header for folder in HEADER_FOLDERS for header in sorted(folder.glob("*.hpp"))]
    pages = {"README.md": render_index(headers)}
    for header in headers:
        pages[page_name(header)] = render_page(header, by_file.get(header.relative_to(HEADERS).as_posix(), []))
    return pages, problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/reference/ instead of writing it")
    options = parser.parse_args(argv[1:])
    if shutil.which("doxygen") is None:
        print("SKIPPED: doxygen is needed (Debian: apt-get install doxygen)")
        return 77
    with tempfile.TemporaryDirectory() as scratch:
        pages, problems = generate(Path(scratch))
    for problem in problems:
        print(problem)
    if not options.check:
        OUT.mkdir(exist_ok=True)
        for stale in OUT.rglob("*.md"):
            if stale.relative_to(OUT).as_posix() not in pages:
                stale.unlink()
        for name, text in pages.items():
            (OUT / name).parent.mkdir(parents=True, exist_ok=True)
            (OUT / name).write_text(text, encoding="utf-8")
        print(f"docs/reference/: {len(pages)} pages")
        return 1 if problems else 0
    stale = sorted(name for name, text in pages.items()
                   if not (OUT / name).is_file() or (OUT / name).read_text(encoding="utf-8") != text)
    extra = sorted(name for name in (p.relative_to(OUT).as_posix() for p in OUT.rglob("*.md")) if name not in pages) \
        if OUT.is_dir() else []
    for name in stale:
        print(f"docs/reference/{name} is not what the headers make: run python3 scripts/reference.py")
    for name in extra:
        print(f"docs/reference/{name} belongs to no header: run python3 scripts/reference.py")
    if problems or stale or extra:
        return 1
    print(f"docs/reference/: {len(pages)} pages, as the headers make them; every public declaration has a comment")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
