#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target: fuzz/corpus/TARGET/NAME.

The seeds are the inputs the tests already care about, in each target's
input format:

- frontmatter: the example SKILL.md files (examples/skills) and SKILL.md
  shapes at the edges of the fence and the YAML rules;
- frontmatter_differential: YAML frontmatters that stay on the fast path,
  that leave it for serde_yaml, and the special characters and escapes the
  differential tests use;
- vpath: the hostile paths and look-alike segments of the testkit
  (backends/src/testkit/hostile.rs) beside valid paths, each paired with a
  relative path to join;
- catalog_memory: three sources of skills (the examples among them) with
  shadowing, broken and hidden skills, and reads that try to leave a
  skill's directory;
- archive: .skill archives, valid and crafted byte by byte as the archive
  tests craft them (tests/it/archive.rs), one for every refusal kind reachable
  under the default limits.

The typed targets (vpath, catalog_memory) read their input through the
`arbitrary` crate (1.x); `Encoder` writes bytes that decode to the intended
value (`cargo fuzz fmt TARGET FILE` prints what a file decodes to).

The output is deterministic. Run from anywhere; existing seed files of the
same name are overwritten, others are left alone:

    python3 fuzz/make_corpus.py
"""

import re
import struct
import unicodedata
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(target, name, data):
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (directory / name).write_bytes(data)


def skill_md(name, description, body="Body.\n"):
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}"


def examples():
    """(layer, skill name, path inside the skill, bytes) of examples/skills."""
    out = []
    for path in sorted((ROOT / "examples" / "skills").glob("*/*/**/*")):
        if path.is_file():
            layer, skill, *rest = path.relative_to(ROOT / "examples" / "skills").parts
            out.append((layer, skill, "/".join(rest), path.read_bytes()))
    return out


# ---------------------------------------------------------------------------
# frontmatter and frontmatter_differential

# YAML frontmatters (without their fences). The fuzz targets parse with the
# directory name `fuzz-skill`.
YAMLS = {
    "minimal": "name: fuzz-skill\ndescription: Does one thing.\n",
    "all-fields": (
        "name: fuzz-skill\n"
        "description: Summarise a file. Use when asked what is in it.\n"
        "license: Apache-2.0\n"
        "compatibility: Needs python3 (standard library only).\n"
        "allowed-tools: Read Bash\n"
        "metadata:\n"
        "  author: data-team\n"
        "  version: \"1.0\"\n"
    ),
    "allowed-tools-list": "name: fuzz-skill\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git:*)\n",
    "block-scalars": (
        "name: fuzz-skill\n"
        "description: |\n  first line\n  second line\n"
        "compatibility: >-\n  folded\n  text\n\n  paragraph\n"
        "license: |+\n  kept\n\n"
    ),
    "indentation-indicator": "name: fuzz-skill\ndescription: |2\n    indented\n  less\n",
    "quoted": (
        "name: 'fuzz-skill'\n"
        "description: \"bell \\a, \\u00e9, \\x41, \\\"quote\\\", tab\\tend\"\n"
        "license: 'it''s'\n"
    ),
    "escapes": 'description: "\\0 \\e \\N \\_ \\L \\P \\u2028 \\U0001F600 \\/ \\ "\nname: fuzz-skill\n',
    "comments": "# leading comment\nname: fuzz-skill # trailing\n\ndescription: d #not a comment? yes\n",
    "crlf": "name: fuzz-skill\r\ndescription: |\r\n  carriage\r\n  returns\r\n",
    "numbers": "name: 123\ndescription: -1.5e3\nlicense: .inf\ncompatibility: 0x1F\nversion: +12\n",
    "nulls-and-bools": "name: ~\ndescription: null\nlicense: True\ncompatibility: false\n",
    "empty-values": "name:\ndescription: ''\nmetadata:\n",
    "nested-metadata": "name: fuzz-skill\ndescription: d\nmetadata:\n  a:\n    b: deep\n  list: [1, 2]\n",
    "flow-mapping": "{name: fuzz-skill, description: flow style}\n",
    "flow-values": "name: fuzz-skill\ndescription: [not, a, string]\nmetadata: {k: v}\n",
    "anchors-aliases": "name: &n fuzz-skill\ndescription: *n\nmetadata: &m {a: 1}\nother: *m\n",
    "merge-key": "base: &b {name: fuzz-skill}\n<<: *b\ndescription: merged\n",
    "tags": "name: !!str fuzz-skill\ndescription: !custom d\nmetadata: !!map {a: b}\n",
    "complex-key": "? name\n: fuzz-skill\n? [a, b]\n: description\n",
    "duplicate-keys": "name: fuzz-skill\ndescription: one\ndescription: two\n",
    "multiline-plain": "name: fuzz-skill\ndescription: a plain\n  scalar on\n  three lines\n",
    "tabs": "name:\tfuzz-skill\ndescription: \ttabbed\n\tbad: indent\n",
    "uppercase-name": "name: Fuzz-Skill\ndescription: d\n",
    "name-mismatch": "name: other-skill\ndescription: d\n",
    "long-name": "name: " + "a" * 65 + "\ndescription: d\n",
    "consecutive-hyphens": "name: fuzz--skill\ndescription: d\n",
    "long-description": "name: fuzz-skill\ndescription: " + "word " * 210 + "\n",
    "unknown-keys": "name: fuzz-skill\ndescription: d\nversion: 2\nauthor: me\n",
    "document-markers": "--- \nname: fuzz-skill\ndescription: d\n...\n",
    "not-a-mapping": "- name\n- description\n",
    "scalar-document": "just text\n",
    "unicode": "name: fuzz-skill\ndescription: 'é → 日本 \u00a0 \U0001F600'\nmetadata:\n  ключ: значение\n",
    "special-characters": (
        "name: fuzz-skill\n"
        "description: a\u007fb\u0085c\u009fd\u2028e\u2029\ufeff\ufffd\n"
        "license: \"\\u0000\"\n"
        "compatibility: a\rb\n"
    ),
    "noncharacter": "name: fuzz-skill\ndescription: \"x\ufffe\"\nlicense: y\uffff\n",
    "indicators": "name: fuzz-skill\ndescription: '@`%!&*|>?,[]{}#:'\nlicense: - dash\ncompatibility: :colon\n",
    "colon-in-value": "name: fuzz-skill\ndescription: key: value inside\n",
    "empty": "",
}

# Whole SKILL.md shapes around the fence.
SKILL_MDS = {
    "no-frontmatter": "# A title\n\nJust markdown, no frontmatter.\n",
    "empty-file": "",
    "bom": "\ufeff" + skill_md("fuzz-skill", "With a byte order mark."),
    "crlf": skill_md("fuzz-skill", "Windows line ends.").replace("\n", "\r\n"),
    "unclosed-fence": "---\nname: fuzz-skill\ndescription: never closed\n\n# Body\n",
    "only-fences": "---\n---\n",
    "fence-with-spaces": "--- \nname: fuzz-skill\ndescription: d\n---  \nbody\n",
    "four-dashes": "----\nname: fuzz-skill\ndescription: d\n----\n",
    "leading-blank-line": "\n---\nname: fuzz-skill\ndescription: d\n---\n",
    "fence-at-eof": "---\nname: fuzz-skill\ndescription: d\n---",
    "dots-close": "---\nname: fuzz-skill\ndescription: d\n...\nbody\n",
    "second-fence-in-body": skill_md("fuzz-skill", "d", "---\nname: evil\n---\n"),
}


def frontmatter_seeds():
    for layer, skill, path, data in examples():
        if path == "SKILL.md":
            write("frontmatter", f"example-{layer}-{skill}", data)
            text = data.decode()
            yaml = text.split("---\n", 2)[1]
            write("frontmatter_differential", f"example-{layer}-{skill}", yaml)
    for name, yaml in YAMLS.items():
        write("frontmatter", f"yaml-{name}", f"---\n{yaml}---\n\n# Body\n")
        write("frontmatter_differential", name, yaml)
    for name, text in SKILL_MDS.items():
        write("frontmatter", name, text)
    valid = skill_md("fuzz-skill", "Not UTF-8 inside.").encode()
    write("frontmatter", "non-utf8-body", valid + b"\xff\xfe\x80\n")
    write("frontmatter", "non-utf8-frontmatter", b"---\nname: fuzz-skill\ndescription: \xc3\x28\n---\n")
    write("frontmatter", "nul", b"---\nname: fuzz-skill\x00\ndescription: d\n---\n")


# ---------------------------------------------------------------------------
# The `arbitrary` encoding of the typed targets.


class Encoder:
    """Bytes that `arbitrary` 1.x decodes to a chosen value.

    `Unstructured` takes plain data from the front of the input and each
    collection's length from its end, in as many bytes (1, 2 or 4) as the
    data left at that point needs. Steps are recorded in decoding order and
    laid out at the end, when the total is known.
    """

    def __init__(self):
        self.steps = []  # ("front", bytes) or ("len", n)

    def byte(self, value):
        self.steps.append(("front", bytes([value])))

    def flag(self, value):
        self.byte(1 if value else 0)

    def str(self, text):
        """`String`/`&str` not last: a length from the end, then the bytes."""
        data = text.encode() if isinstance(text, str) else text
        self.steps.append(("len", len(data)))
        self.steps.append(("front", data))

    def rest_str(self, text):
        """`&str` last (take_rest): every byte left."""
        self.steps.append(("front", text.encode()))

    def bytes_vec(self, data):
        """`Vec<u8>` not last: a continue flag before each element."""
        for b in data:
            self.flag(True)
            self.byte(b)
        self.flag(False)

    @staticmethod
    def width(remaining):
        if remaining <= 1:
            return max(remaining, 0)
        if remaining <= 0xFF + 1:
            return 1
        if remaining <= 0xFFFF + 2:
            return 2
        return 4

    def finish(self):
        total_front = sum(len(d) for kind, d in self.steps if kind == "front")
        widths = [1 if kind == "len" else 0 for kind, _ in self.steps]
        while True:
            remaining = total_front + sum(widths)
            new = []
            for (kind, value), w in zip(self.steps, widths):
                if kind == "front":
                    new.append(0)
                    remaining -= len(value)
                else:
                    w = self.width(remaining)
                    new.append(w)
                    remaining -= w
            if new == widths:
                break
            widths = new
        front = b"".join(d for kind, d in self.steps if kind == "front")
        back = []
        for (kind, value), w in zip(self.steps, widths):
            if kind == "len":
                if w == 0:
                    assert value == 0
                    continue
                assert value < 256**w
                back.append(value.to_bytes(w, "big"))
        # The first length read is the last bytes of the input.
        return front + b"".join(reversed(back))


def rust_strings(source, const):
    """The string literals of `const NAME: &[&str] = &[...];` in Rust source."""
    block = re.search(rf"const {const}: &\[&str\] = &\[(.*?)\n\];", source, re.S).group(1)
    out = []
    for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', block):
        text = re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda m: chr(int(m.group(1), 16)), literal)
        text = re.sub(r"\\(.)", lambda m: {"0": "\0", "n": "\n", "r": "\r", "t": "\t"}.get(m.group(1), m.group(1)), text)
        out.append(text)
    return out


def vpath_seeds():
    source = (ROOT / "backends" / "src" / "testkit" / "hostile.rs").read_text()
    hostile = rust_strings(source, "HOSTILE_PATHS")
    lookalikes = rust_strings(source, "LOOKALIKE_SEGMENTS")
    valid = ["/", "/skills/pdf", "/base/code-review/references", "/a/b/c/SKILL.md", "/é/日本/\U0001F600", "/ a /b "]
    relatives = ["references/a.md", "", "..", "../x", "a/../../b", "/abs", "a//b", "./a", "a\\b", "SKILL.md"]
    pairs = [(text, relatives[i % len(relatives)]) for i, text in enumerate(hostile)]
    pairs += [(f"/skills/{segment}", segment) for segment in lookalikes]
    pairs += [(text, relative) for text in valid for relative in relatives[:4]]
    pairs.append(("/" + "/".join(["a"] * 200), "b/" * 100))
    for i, (text, relative) in enumerate(pairs):
        e = Encoder()
        e.str(text)
        e.rest_str(relative)
        write("vpath", f"pair-{i:03}", e.finish())


SOURCES = {"base": 0, "user": 1, "team": 2}


def catalog_input(files, reads):
    """`Input { files: Vec<(u8, String, Vec<u8>)>, relative_reads: Vec<String> }`."""
    e = Encoder()
    for source, relative, data in files:
        e.flag(True)
        e.byte(SOURCES[source])
        e.str(relative)
        e.bytes_vec(data.encode() if isinstance(data, str) else data)
    e.flag(False)
    for relative in reads:
        e.flag(True)
        e.str(relative)
    return e.finish()


ESCAPING_READS = ["references/a.md", "SKILL.md", "../other/SKILL.md", "references/../../x", "/etc/passwd", "a\\b", ""]


def catalog_seeds():
    layers = {"base": "base", "user": "user", "team": "team", "project": "team"}
    files = [(layers[layer], f"{skill}/{path}", data) for layer, skill, path, data in examples()]
    write(
        "catalog_memory",
        "examples",
        catalog_input(files, ["references/checklist.md", "scripts/summarize.py", "../changelog/SKILL.md", "/etc/passwd"]),
    )
    seeds = {
        "shadowing": [
            ("base", "pdf/SKILL.md", skill_md("pdf", "Base.")),
            ("user", "pdf/SKILL.md", skill_md("pdf", "User.")),
            ("team", "pdf/SKILL.md", skill_md("pdf", "Team.")),
            ("base", "pdf/references/a.md", "only in base"),
            ("team", "pdf/references/b.md", "only in team"),
        ],
        "broken-skills": [
            ("base", "good/SKILL.md", skill_md("good", "Fine.")),
            ("base", "mismatch/SKILL.md", skill_md("other", "Name differs.")),
            ("user", "nofront/SKILL.md", "no frontmatter"),
            ("team", "Upper/SKILL.md", skill_md("Upper", "Uppercase.")),
            ("team", "bad-yaml/SKILL.md", "---\nname: [bad\n---\n"),
            ("user", "binary/SKILL.md", b"---\nname: binary\ndescription: \xff\n---\n"),
        ],
        "layout": [
            ("base", "SKILL.md", skill_md("base", "At the root.")),
            ("base", "outer/inner/SKILL.md", skill_md("inner", "Nested.")),
            ("user", ".hidden/SKILL.md", skill_md(".hidden", "Hidden.")),
            ("user", "git/.git/config", "[core]"),
            ("team", "t/skill.md", skill_md("t", "Lowercase file name.")),
            ("team", "t/.skillstore/signature", "sig"),
            ("team", "t/references/../SKILL.md", skill_md("t", "Through a parent step.")),
        ],
    }
    for name, seed in seeds.items():
        write("catalog_memory", name, catalog_input(seed, ESCAPING_READS))


# ---------------------------------------------------------------------------
# archive: zip files laid out byte by byte, as tests/it/archive.rs does.


class Raw:
    def __init__(self, name, data, *, flags=0, method=0, mode=0o100644, declared=None, crc=None, points_at=None):
        self.name = name.encode() if isinstance(name, str) else name
        self.data = data.encode() if isinstance(data, str) else data
        self.flags, self.method, self.mode = flags, method, mode
        self.declared, self.crc, self.points_at = declared, crc, points_at
        # Deflated entries: the stored data is the raw deflate stream.
        self.size = len(self.data)
        self.check = zlib.crc32(self.data)
        if method == 8:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
            self.data = compressor.compress(self.data) + compressor.flush()


def raw_zip(entries):
    out = bytearray()
    offsets = []

    def fields(e):
        crc = e.check if e.crc is None else e.crc
        size = e.size if e.declared is None else e.declared
        return crc, len(e.data), size

    for e in entries:
        offsets.append(len(out))
        crc, csize, size = fields(e)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, e.flags, e.method, 0, 0x21, crc, csize, size, len(e.name), 0)
        out += e.name + e.data
    directory = len(out)
    for i, e in enumerate(entries):
        crc, csize, size = fields(e)
        offset = offsets[i if e.points_at is None else e.points_at]
        out += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50, (3 << 8) | 20, 20, e.flags, e.method, 0, 0x21,
            crc, csize, size, len(e.name), 0, 0, 0, 0, e.mode << 16, offset,
        )  # fmt: skip
        out += e.name
    size = len(out) - directory
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), size, directory, 0)
    return bytes(out)


def deflated(*entries):
    return raw_zip([Raw(name, data, method=8) for name, data in entries])


def archive_seeds():
    pdf = skill_md("pdf", "Read PDFs.")

    def pdf_with(extra):
        return raw_zip([Raw("pdf/SKILL.md", pdf), extra])

    csv = [(f"{skill}/{path}", data) for layer, skill, path, data in examples() if (layer, skill) == ("base", "csv-report")]
    seeds = {
        # Accepted.
        "valid-deflated": deflated(("pdf/SKILL.md", pdf), ("pdf/references/a.md", "# A\n")),
        "valid-stored": raw_zip([Raw("pdf/SKILL.md", pdf), Raw("pdf/scripts/run.sh", "#!/bin/sh\necho hi\n")]),
        "valid-directory-entries": raw_zip(
            [Raw("pdf/", "", mode=0o40755), Raw("pdf/SKILL.md", pdf), Raw("pdf/references/", "", mode=0o40755)]
        ),
        "valid-signature": raw_zip([Raw("pdf/SKILL.md", pdf), Raw("pdf/.skillstore/signature", "sig")]),
        "example-csv-report": deflated(*csv),
        "nested-archive": deflated(
            ("pdf/SKILL.md", pdf), ("pdf/assets/bundle.zip", deflated(("evil/SKILL.md", "x"), ("../../escape", "x")))
        ),
        # Refused, one per kind.
        "not-an-archive": b"not a zip at all",
        "truncated": deflated(("pdf/SKILL.md", pdf))[:-10],
        "empty": raw_zip([]),
        "parent-segment": pdf_with(Raw("pdf/../../etc/cron.d/job", "x")),
        "absolute-path": pdf_with(Raw("/etc/passwd", "x")),
        "backslash-path": pdf_with(Raw("pdf\\..\\..\\windows\\x", "x")),
        "drive-letter": pdf_with(Raw("C:/Windows/x", "x")),
        "invalid-path": pdf_with(Raw("pdf//a\x01b.md", "x")),
        "hidden-top": raw_zip([Raw(".hidden/SKILL.md", skill_md(".hidden", "x"))]),
        "non-utf8-name": pdf_with(Raw(b"pdf/\xff\xfe.md", "x")),
        "symlink-entry": pdf_with(Raw("pdf/up", "../..", mode=0o120777)),
        "special-entry": pdf_with(Raw("pdf/assets/fifo", "", mode=0o010644)),
        "duplicate-exact": raw_zip([Raw("pdf/SKILL.md", pdf), Raw("pdf/SKILL.md", skill_md("pdf", "Else."))]),
        "duplicate-folded": raw_zip(
            [
                Raw("pdf/SKILL.md", pdf),
                Raw("pdf/references/caf\u00e9.md", "one"),
                Raw(unicodedata.normalize("NFD", "pdf/references/caf\u00e9.md"), "two"),
                Raw("pdf/References", "a file"),
            ]
        ),
        "no-top-directory": deflated(("SKILL.md", pdf)),
        "several-top-directories": deflated(("pdf/SKILL.md", pdf), ("__MACOSX/pdf/._SKILL.md", "x")),
        "missing-skill-md": deflated(("pdf/references/a.md", "no skill here")),
        "encrypted-entry": pdf_with(Raw("pdf/references/secret.md", "ciphertext", flags=1)),
        "unsupported-compression": pdf_with(Raw("pdf/references/a.md", "data", method=12)),
        "size-declared-short": pdf_with(Raw("pdf/references/a.md", b"a" * 100, declared=10)),
        "size-declared-long": pdf_with(Raw("pdf/references/a.md", b"a" * 100, declared=200)),
        "claims-gigabytes": raw_zip(
            [Raw("pdf/SKILL.md", pdf)] + [Raw(f"pdf/assets/{i}.bin", bytes(10), declared=2**32 - 2) for i in range(4)]
        ),
        "deflate-bomb": deflated(("pdf/SKILL.md", pdf), ("pdf/assets/zeros.bin", bytes(2 * 1024 * 1024))),
        "corrupt-entry": pdf_with(Raw("pdf/references/a.md", "hello", crc=0xDEADBEEF)),
        "corrupt-deflate": pdf_with(Raw("pdf/references/a.md", b"\xff" * 16, method=8, crc=0)),
        "overlapping-entries": pdf_with(Raw("pdf/references/b.md", pdf, points_at=0)),
        "reserved-path": pdf_with(Raw("pdf/.skillstore/history.json", "{}")),
        "git-entry": pdf_with(Raw("pdf/references/.GIT/config", "[core]")),
        "hidden-path": pdf_with(Raw("pdf/.env", "SECRET=1")),
        "invalid-skill": deflated(("pdf/SKILL.md", skill_md("other", "x"))),
    }
    for name, data in seeds.items():
        write("archive", name, data)


if __name__ == "__main__":
    frontmatter_seeds()
    vpath_seeds()
    catalog_seeds()
    archive_seeds()
    for target in sorted(p.name for p in CORPUS.iterdir()):
        files = list((CORPUS / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
