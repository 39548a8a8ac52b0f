"""What README.md and docs/*.md cite, checked against the tree (the checks of ctest tools/docs_references_test, label cpu): paths,
gtest names and filters, Python test names, config keys, `stepgraph <command>` flags, `scripts/gpu.sh` parts,
recipes and environment variables. Prints every bad reference as doc:line: `reference`: what is wrong.

    python3 tests/tools/docs_references_test.py --stepgraph build/src/stepgraph [-v]

What counts as a reference (in a backticked span, a code line -- fenced, or indented after a blank line -- or, for
the unambiguous kinds, prose), and where it is looked up:
- Paths. A word whose first folder is a folder at the root (src/, tests/, bench/, scripts/, tools/, recipes/,
  docs/, cmake/), or, in a span or code line, a folder of src/ or tests/ (the docs write src/train/x.cpp and
  tests/train/x_test.cpp as train/x.cpp and train/x_test), or any word with a source extension (.cpp .h .cu .cuh
  .py .sh .cmake .proto). It resolves from the root, from src/ or tests/, or as the tail of a path of the tree
  (layers/moe_layer.cpp); without an extension it may be a file's stem (kernels/grad_norm; checkpoint/retention_test,
  a ctest name). `<name>`, an ALL-CAPS component (RECIPE) and `*` are placeholders, `{h,cpp}` stands for each, a word
  starting with _ is a file name's end (_emulated_test.cpp); a bare file name may also be a header the tree
  #includes (nccl.h). Below the root folders .gitignore names (data/,
  runs/, gpu-results/) a path is a run-time output, not looked up unless it has a source extension; a
  build/.../NAME is a CMake target or a file stem of the tree (the bench/*_bench.cu executables).
- gtest names. `Suite.Test`, `Suite.*`, `Suite.Prefix*`, `Prefix/Suite.Test/param` and `.Test` (shorthand after a suite:
  some suite has the test) must be a TEST/TEST_F/TEST_P/TYPED_TEST of tests/; an instantiation prefix, when written, must be
  one INSTANTIATE_TEST_SUITE_P gives the suite (parameter names are not checked). A Suite.Test whose suite is no
  test suite counts only when the word Suite occurs nowhere in the tree (Event.Foo is no test if Event is a class).
  Every pattern of a --gtest_filter / GTEST_FILTER value, and of a span that is a ':'-list of test patterns, must
  match some test as gtest matches it: the full name, Prefix/Suite.Test/param for TEST_P.
- Python tests. A span test_* must be a def in tests/, tools/ or bench/.
- Config keys. section.key (also =value, : value) for a section `stepgraph config show` prints must be a key
  stepgraph takes: one `config show` prints, or one it accepts as an override (`config show llama/tiny KEY=null`
  refuses an unknown key by name; Bridge's keys accepted without effect print only when set). section.* needs
  the section. Not keys: section.EXT for a file extension (model.safetensors), or section.key.more (HF tensors).
- `stepgraph <command> ... -flag` in a span or code line (the span may leave out `stepgraph`: `bench --dryrun`):
  every flag must be in `stepgraph <command> --help`; bench also takes the Megatron-Bridge flags of
  src/bench/bridge_flags.cpp, which its --help only summarizes. `... -- command` after launch is checked as a
  command too; a recipe argument (train, validate, config show) and `-m F -mr N` must be a shipped recipe.
- `<script>.py ... --flag` in a span or code line, the script a file of the tree: every flag must be spelled as a
  quoted string ("--flag") in a .py file of the script's folder (its argparse, or a module beside it).
- `scripts/gpu.sh <part>...`: every part must be one gpu.sh knows (as `gpu.sh <unknown>` lists them); in prose only
  the first word after gpu.sh spelled as a part (lowercase, digits, _), or every such word when the first two are
  parts (`gpu.sh tests bench torch`: a list, not "gpu.sh recompute runs this"). A NAME=value word in front of a
  scripts/ script must name a variable the tree reads.
- Recipes: a span family/name whose family is a folder of recipes/ must be recipes/<family>/<name>.yaml.
- Environment variables: every STEPGRAPH_* and SG_* word must occur in the tree outside the docs.

History. docs/correctness.md and docs/performance.md are session logs, and a log may name what a session measured
and did not keep (a branch's test or variable), or a test by the name it had then. Every line of every doc is
checked; a line that keeps such references on purpose ends with `<!-- docs-references historical: REF REF -->`
(invisible when rendered; in a fenced block, a shell comment `# docs-references historical: REF`), naming them as
this test prints them. That exempts those references on that line and nothing else, and a marker naming a reference
the line does not get wrong is an error too, so the markers stay few and true.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from docs_references_tree import SOURCE_EXTENSIONS, Tree, tree_of

MARKER = re.compile(r"(?:<!--|#)\s*docs-references historical:\s*(.*?)\s*(?:-->|$)", re.M)
# section.EXT: a file, not a config key (model.safetensors).
FILE_EXTENSIONS = {"safetensors", "json", "jsonl", "yaml", "txt", "py", "md", "bin", "idx", "log",
                   "model"}  # tokenizer.model: SentencePiece's model file
# section.key words that are no config key, each with what it is.
NOT_CONFIG_KEYS = {
    "model.vocab",  # tokenizer.json's vocabulary: the JSON path inside a Hugging Face tokenizer file
    "model.transformer",  # Megatron's TransformerConfig map in a saved Bridge model config: its keys are model keys
}
# Paths the docs cite that lie outside this repository, each with where it is.
EXTERNAL_PATHS = {
    "scripts/performance/run_script.py",  # Megatron-Bridge's benchmark script, whose flags `stepgraph bench` takes
    "run_script.py",  # the same, by its file name
}


@dataclass(frozen=True)
class Problem:
    doc: str
    line: int
    ref: str  # the reference as the doc writes it (what a historical marker names)
    what: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: `{self.ref}`: {self.what}"


# ---------------------------------------------------------------------------------------------------------------
# Reading a doc: backticked spans, code lines and prose, each with its line number.

@dataclass
class Piece:
    line: int
    text: str
    kind: str  # "span" (backticked), "code" (a fenced or indented line, its # comment cut), "comment", "prose"


_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def read_doc(text: str) -> list[Piece]:
    pieces: list[Piece] = []
    prose: list[tuple[int, str]] = []
    fenced = False
    previous_blank_or_code = True
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append((number, ""))
            previous_blank_or_code = True
            continue
        indented = line.startswith("    ") and line.strip() and previous_blank_or_code
        if fenced or indented:
            body, comment = split_comment(line)
            pieces.append(Piece(number, body, "code"))
            if comment:
                pieces.append(Piece(number, comment, "comment"))
            prose.append((number, ""))
            previous_blank_or_code = True
        else:
            prose.append((number, line))
            previous_blank_or_code = not line.strip()
    # A span may run over a line break: find the spans in the prose joined again, and map offsets back to lines.
    joined = "\n".join(line for _, line in prose)
    starts = [0]
    for _, line in prose:
        starts.append(starts[-1] + len(line) + 1)

    def line_of(offset: int) -> int:
        lo, hi = 0, len(prose) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if starts[mid] <= offset else (lo, mid - 1)
        return prose[lo][0]

    outside = []
    last = 0
    for match in _SPAN.finditer(joined):
        if "\n\n" in match.group(2):
            continue
        pieces.append(Piece(line_of(match.start()), " ".join(match.group(2).split()), "span"))
        outside.append((last, match.start()))
        last = match.end()
    outside.append((last, len(joined)))
    for begin, end in outside:
        offset = begin
        for part in joined[begin:end].split("\n"):
            if part.strip():
                pieces.append(Piece(line_of(offset), part, "prose"))
            offset += len(part) + 1
    pieces.sort(key=lambda p: p.line)
    return pieces


def split_comment(line: str) -> tuple[str, str]:
    """A shell line's command and its # comment (a # starting a word, outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i:]
    return line, ""


def expand_braces(word: str) -> list[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not match:
        return [word]
    return [w for alt in match.group(1).split(",")
            for w in expand_braces(word[:match.start()] + alt + word[match.end():])]


# ---------------------------------------------------------------------------------------------------------------
# The tree: its files, its tests, and what the program and scripts/gpu.sh say they take.


class Checker:
    def __init__(self, tree: Tree):
        self.tree = tree
        self.doc = ""
        self.found: list[Problem] = []
        self.config_refs: list[tuple[str, int, str]] = []
        self.counts: dict[str, int] = {}

    def bad(self, line: int, ref: str, what: str) -> None:
        self.found.append(Problem(self.doc, line, ref, what))

    def count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    # -- paths
    def path_of(self, word: str, prose: bool) -> str | None:
        """The path a word cites, or None."""
        word = re.sub(r"^[\"'(\[]+|[\"',;:.)\]!?]+$", "", word)
        word = re.sub(r":\d+$", "", word)  # file:line
        if not word or word.startswith(("/", "~", "$", "-", "../", "./")) or "..." in word or "=" in word or \
                "://" in word or re.search(r"[^\w./<>{}*,+-]", word) or word in EXTERNAL_PATHS:
            return None
        if word.startswith("_"):
            word = "*" + word  # _emulated_test.cpp: the suffix of a file name
        first = word.split("/")[0]
        has_source_extension = any(Path(w.rstrip("/")).suffix in SOURCE_EXTENSIONS for w in expand_braces(word))
        if "/" not in word:
            return word if has_source_extension else None
        if first in self.tree.root_folders or self.tree.is_runtime_root(first):
            return word
        if first in self.tree.layers and not prose or has_source_extension:
            return word
        return None

    def check_path(self, line: int, word: str) -> None:
        self.count("path")
        first = word.split("/")[0]
        if self.tree.is_runtime_root(first) and first not in self.tree.root_folders:
            if fnmatch.fnmatchcase(first, "build*"):
                target = word.rstrip("/").split("/")[-1]
                if "/" in word.rstrip("/") and re.fullmatch(r"[\w-]+", target) and not target.isupper() and \
                        target not in self.tree.cmake_targets and not self.tree.exists_as_tail(target + ".*"):
                    self.bad(line, word, f"no CMake target or source file {target} builds it")
                return
            if not any(Path(w).suffix in SOURCE_EXTENSIONS for w in expand_braces(word)):
                return  # a run-time output: data/..., runs/..., gpu-results/...
        for variant in expand_braces(word):
            pattern = "/".join(re.sub(r"<[^<>/]*>|\b[A-Z][A-Z0-9_]*\b(?=[./]|$)", "*", part) if part != "CMakeLists.txt"
                               else part for part in variant.split("/"))
            if not self.resolves(pattern) and not ("/" not in variant and variant in self.tree.included_headers):
                self.bad(line, variant, "no such file or folder (from the root, src/ or tests/, or as the tail of a "
                                        "path of the tree)")

    def resolves(self, pattern: str) -> bool:
        tree = self.tree
        tried = [pattern, "src/" + pattern, "tests/" + pattern]
        if any(tree.exists(p) for p in tried) or tree.exists_as_tail(pattern):
            return True
        if pattern.endswith("/") or "." in pattern.split("/")[-1]:
            return False
        return any(tree.exists(p + ".*") for p in tried) or tree.exists_as_tail(pattern + ".*")  # a stem

    # -- gtest and Python test names
    _TEST = re.compile(r"(?<![\w./*:-])(?:(\w+)/)?([A-Z][A-Za-z0-9]*)\.(\*|[A-Z][A-Za-z0-9_]*\*?)(/[\w*]+)?(?![\w(.:*])")

    def check_test_names(self, line: int, text: str, span: bool) -> None:
        suites = self.tree.gtests
        for match in self._TEST.finditer(text):
            prefix, suite, name, _param = match.groups()
            ref = match.group(0)
            if suite not in suites:
                if suite not in self.tree.words and (name == "*" or re.search(r"[a-z]", name)):
                    self.count("gtest")
                    self.bad(line, ref, f"no gtest suite {suite} in tests/")
                continue
            self.count("gtest")
            entry = suites[suite]
            if prefix and prefix not in entry["prefixes"]:
                self.bad(line, ref, f"{suite} is instantiated as " +
                         (", ".join(f"{p}/" for p in sorted(entry["prefixes"])) or "no prefix") + f", not {prefix}/")
            if name == "*":
                continue
            if name.endswith("*"):
                if not any(t.startswith(name[:-1]) for t in entry["tests"]):
                    self.bad(line, ref, f"no test of {suite} starts with {name[:-1]}")
            elif name not in entry["tests"]:
                self.bad(line, ref, f"no test {suite}.{name} in tests/")
        if span:
            dot = re.fullmatch(r"\.([A-Z][A-Za-z0-9_]*)", text)
            if dot:
                self.count("gtest")
                if not any(dot.group(1) in e["tests"] for e in suites.values()):
                    self.bad(line, text, f"no test named {dot.group(1)} in tests/")
            if re.fullmatch(r"test_\w+", text):
                self.count("python test")
                if text not in self.tree.python_tests:
                    self.bad(line, text, "no Python test of that name in tests/, tools/ or bench/")

    def check_filter(self, line: int, value: str) -> None:
        value = value.strip("'\"")
        for pattern in value.split("-", 1)[0].split(":"):  # the patterns before a '-' run tests
            if pattern not in ("", "*", "...", "..."):
                self.count("gtest filter")
                if not self.filter_matches(pattern):
                    self.bad(line, pattern, "this gtest filter pattern matches no test of tests/ (gtest matches the "
                                            "full name: Prefix/Suite.Test/param for TEST_P)")

    def filter_matches(self, pattern: str) -> bool:
        tail = pattern.split(".", 1)[1] if "." in pattern else ""
        param = tail.rsplit("/", 1)[1] if "/" in tail else "PARAM"  # parameter names are not checked
        return any(fnmatch.fnmatchcase(name.replace("/PARAM", "/" + param) if parameterized else name, pattern)
                   for name, parameterized in self.tree.gtest_full_names)

    # -- config keys (checked together at the end: one run of the program)
    def collect_config_keys(self, line: int, text: str) -> None:
        sections = "|".join(sorted(self.tree.config_keys, key=len, reverse=True))
        for match in re.finditer(rf"(?<![\w./$-])({sections})\.(\*|[A-Za-z_]\w*)(?![\w(]|\.\w)", text):
            section, key = match.groups()
            if key != "*" and key not in FILE_EXTENSIONS and f"{section}.{key}" not in NOT_CONFIG_KEYS:
                self.config_refs.append((self.doc, line, f"{section}.{key}"))

    # -- stepgraph commands
    def check_commands(self, line: int, text: str, span: bool) -> None:
        commands = self.tree.commands
        tops = {c.split()[0] for c in commands}
        words = text.split()
        i = 0
        while i < len(words):
            word = words[i]
            if re.fullmatch(r"(?:\S*/)?stepgraph|\$SG|\"\$SG\"", word) and i + 1 < len(words) and words[i + 1] in tops:
                start = i + 1
            elif span and i == 0 and word in tops and len(words) > 1 and (
                    words[1].startswith("-") or f"{word} {words[1]}" in commands):
                start = 0
            else:
                i += 1
                continue
            command, j = words[start], start + 1
            if j < len(words) and f"{command} {words[j]}" in commands:
                command, j = f"{command} {words[j]}", j + 1
            elif any(c.startswith(command + " ") for c in commands) and j < len(words) and \
                    re.fullmatch(r"[a-z]+", words[j]):
                self.bad(line, f"stepgraph {command} {words[j]}", f"stepgraph {command} has no such subcommand")
            self.count("command")
            positional: list[str] = []
            while j < len(words):
                w = words[j]
                if w in ("|", "||", "&&", ";", "2>&1", "&") or w.startswith(("#", "|", ">", "2>")):
                    break
                if w == "--":
                    if j + 1 < len(words) and words[j + 1] in tops:
                        words.insert(j + 1, "stepgraph")  # launch -n 2 -- train ...: a command of its own
                    break
                if re.fullmatch(r"--?[A-Za-z][\w-]*(=\S*)?", w):
                    flag = w.split("=")[0]
                    self.count("flag")
                    if flag not in commands[command]:
                        self.bad(line, flag, f"`stepgraph {command} --help` has no {flag}")
                elif not w.startswith("-"):
                    positional.append(w.strip("'\""))
                j += 1
            self.check_recipe_arguments(line, command, positional, words[start:j])
            i = j

    def check_recipe_arguments(self, line: int, command: str, positional: list[str], words: list[str]) -> None:
        if command in ("train", "validate", "config show") and positional:
            self.check_recipe(line, positional[0])
        if command == "bench":
            given = dict(zip(words, words[1:]))
            family = given.get("-m", given.get("--model_family_name"))
            name = given.get("-mr", given.get("--model_recipe_name"))
            if family and name and re.fullmatch(r"[a-z]\w*", family) and re.fullmatch(r"[a-z0-9]\w*", name):
                self.count("recipe")
                if f"{family}/{name}" not in self.tree.recipes:
                    self.bad(line, f"-m {family} -mr {name}", f"no recipe recipes/{family}/{name}.yaml")

    def check_recipe(self, line: int, word: str) -> None:
        families = {r.split("/")[0] for r in self.tree.recipes}
        if re.fullmatch(r"[a-z]+/[a-z0-9_]+", word) and word.split("/")[0] in families:
            self.count("recipe")
            if word not in self.tree.recipes:
                self.bad(line, word, f"no recipe recipes/{word}.yaml")

    # -- the Python tools
    def check_python_flags(self, line: int, text: str) -> None:
        words = text.split()
        for i, word in enumerate(words):
            script = word.strip("'\"")
            if not script.endswith(".py"):
                continue
            found = [p for p in self.tree.files if p == script or p.endswith("/" + script)]
            if len(found) != 1:
                continue  # a missing one is the path check's; a bare name of several, ambiguous
            folder = found[0].rsplit("/", 1)[0] + "/"
            sources = [t for r, t in self.tree.texts.items() if r.endswith(".py") and r.startswith(folder)]
            for w in words[i + 1:]:
                if w in ("|", "||", "&&", ";") or w.startswith(("#", ">")):
                    break
                flag = re.fullmatch(r"(--?[A-Za-z][\w-]*)(=\S*)?", w)
                if not flag or flag.group(1) in ("-h", "--help"):
                    continue
                self.count("python flag")
                if not any(re.search(r"[\"']" + re.escape(flag.group(1)) + r"[\"'=]", t) for t in sources):
                    self.bad(line, flag.group(1), f"{found[0]} takes no such flag (no .py of {folder} spells it)")

    # -- scripts/gpu.sh and variables
    def check_gpu_sh(self, line: int, text: str, every_word: bool) -> None:
        words = text.split()
        for i, word in enumerate(words):
            if not re.fullmatch(r"[\"'(]*(?:\S*/)?gpu\.sh", word):
                continue
            run = []
            for w in words[i + 1:]:
                if not re.fullmatch(r"[a-z][a-z0-9_]*", w):
                    break
                run.append(w)
            if not every_word and not (len(run) >= 2 and all(w in self.tree.gpu_parts for w in run[:2])):
                run = run[:1]  # prose: "gpu.sh recompute runs this"; a list of parts when its first two are parts
            for w in run:
                self.count("gpu.sh part")
                if w not in self.tree.gpu_parts:
                    self.bad(line, f"gpu.sh {w}", f"scripts/gpu.sh has no part {w} (its parts: "
                                                 f"{' '.join(sorted(self.tree.gpu_parts))})")

    def check_variables(self, line: int, text: str, command: bool) -> None:
        for var in sorted(set(re.findall(r"(?<![\w$])((?:STEPGRAPH|SG)_[A-Z0-9_]*[A-Z0-9])\b", text))):
            self.count("variable")
            if var not in self.tree.words:
                self.bad(line, var, "no such variable in the tree (src/, scripts/, tests/, bench/, tools/, cmake/)")
        if not command:
            return
        words = text.split()
        for i, w in enumerate(words):
            match = re.fullmatch(r"([A-Z][A-Z0-9_]*)=\S*", w)
            rest = [x for x in words[i + 1:] if not re.fullmatch(r"[A-Z][A-Z0-9_]*=\S*", x)]
            rest = rest[1:] if rest[:1] == ["bash"] else rest
            if match and rest and rest[0].startswith("scripts/"):
                self.count("variable")
                if match.group(1) not in self.tree.words:
                    self.bad(line, match.group(1), f"nothing in the tree reads this variable ({rest[0]} is run)")

    # -- one doc
    def check_doc(self, rel: str, text: str) -> None:
        self.doc = rel
        for piece in read_doc(MARKER.sub("", text)):
            t, line, kind = piece.text, piece.line, piece.kind
            span, code = kind == "span", kind == "code"
            for word in t.split():
                path = self.path_of(word, prose=kind in ("prose", "comment"))
                if path:
                    self.check_path(line, path)
            self.check_test_names(line, t, span)
            for match in re.finditer(r"(?:--gtest_filter[= ]|GTEST_FILTER=)('[^']*'|\"[^\"]*\"|\S+)", t):
                self.check_filter(line, match.group(1))
            if span and ":" in t and all(
                    re.fullmatch(r"(?:\w+/)?[*A-Z][\w*]*(?:\.[\w*]+)?(?:/[\w*]+)?", p) and re.search(r"[a-z]", p)
                    for p in t.split(":")):
                self.check_filter(line, t)
            self.collect_config_keys(line, t)
            if span or code:
                self.check_commands(line, t, span)
                self.check_python_flags(line, t)
            self.check_gpu_sh(line, t, every_word=span or code)
            self.check_variables(line, t, command=span or code)
            if span:
                self.check_recipe(line, t)

    def finish(self, markers: dict[tuple[str, int], set[str]]) -> list[Problem]:
        unknown = self.tree.unknown_keys({key for _, _, key in self.config_refs})
        for doc, line, key in self.config_refs:
            self.count("config key")
            if key in unknown:
                self.found.append(Problem(doc, line, key, f"not a config key: `stepgraph config show llama/tiny "
                                                          f"{key}=...` says unknown key"))
        problems = []
        used: dict[tuple[str, int], set[str]] = {}
        for p in sorted(set(self.found), key=lambda p: (p.doc, p.line, p.ref, p.what)):
            if p.ref in markers.get((p.doc, p.line), set()):
                used.setdefault((p.doc, p.line), set()).add(p.ref)
            else:
                problems.append(p)
        for (doc, line), refs in sorted(markers.items()):
            for ref in sorted(refs - used.get((doc, line), set())):
                problems.append(Problem(doc, line, ref, "the historical marker names it, but the line gets nothing "
                                                        "wrong about it: drop it from the marker"))
        return problems


def check_docs(root: Path, stepgraph: str, docs: list[Path] | None = None) -> tuple[list[Problem], dict[str, int]]:
    """Every bad reference of the docs (README.md and docs/*.md unless `docs` names others), and how many references
    of each kind were checked."""
    checker = Checker(tree_of(root, stepgraph))
    markers: dict[tuple[str, int], set[str]] = {}
    for path in docs if docs is not None else [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        text = path.read_text()
        for number, line in enumerate(text.splitlines(), start=1):
            for match in MARKER.finditer(line):
                markers.setdefault((rel, number), set()).update(match.group(1).split())
        checker.check_doc(rel, text)
    return checker.finish(markers), checker.counts
