"""What the tree holds, for tests/tools/docs_references.py to check the docs against: its files and folders, its gtest
names and instantiations, Python test names, the config keys and command flags the built stepgraph takes (asked of
the binary itself), gpu.sh's parts, recipes and the environment variables the code reads."""
from __future__ import annotations

import fnmatch
import functools
import os
import re
import subprocess
from pathlib import Path

SOURCE_EXTENSIONS = {".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".proto"}
_SKIPPED_DIRS = {".git", "third_party", "__pycache__"}  # never searched: version control, third-party sources
# The test that plants wrong references in its own text: not a place where a name "occurs in the tree".
SELF = "tests/tools/docs_references_test.py"


class Tree:
    def __init__(self, root: Path, stepgraph: str):
        self.root = root
        self.stepgraph = stepgraph
        self.runtime_roots = []  # the root folders .gitignore names: run-time outputs (data, runs, build*, ...)
        gitignore = root / ".gitignore"
        if gitignore.is_file():
            for line in gitignore.read_text().splitlines():
                line = line.strip()
                if line.startswith("/") and line.endswith("/"):
                    self.runtime_roots.append(line.strip("/"))
        self.files: list[str] = []
        self.dirs: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            rel = "" if rel == "." else rel + "/"
            if "CMakeCache.txt" in filenames:  # a build folder, whatever its name: outputs, not sources
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS and
                                 not (rel == "" and self.is_runtime_root(d)))
            self.dirs |= {rel + d for d in dirnames}
            self.files += [rel + f for f in filenames]
        self.file_set = set(self.files)
        self.root_folders = {d for d in self.dirs if "/" not in d and not d.startswith(".")}
        self.layers = {d.split("/")[1] for d in self.dirs if re.fullmatch(r"(src|tests)/[^/]+", d)}

    def is_runtime_root(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.runtime_roots)

    @functools.cached_property
    def texts(self) -> dict[str, str]:
        """Every text file outside README.md and docs/, by path."""
        texts = {}
        for rel in self.files:
            if rel.startswith("docs/") or rel == "README.md" or Path(rel).suffix in (".jsonl", ".safetensors") or \
                    rel == SELF:  # this file plants wrong references in its test
                continue
            try:
                texts[rel] = (self.root / rel).read_text(errors="replace")
            except OSError:
                pass
        return texts

    @functools.cached_property
    def words(self) -> set[str]:
        """Every identifier of the tree outside the docs."""
        return {w for text in self.texts.values() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}

    @functools.cached_property
    def included_headers(self) -> set[str]:
        return {h.split("/")[-1] for text in self.texts.values()
                for h in re.findall(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", text)}

    @functools.cached_property
    def cmake_targets(self) -> set[str]:
        return {t for rel, text in self.texts.items() if rel.endswith(("CMakeLists.txt", ".cmake"))
                for t in re.findall(r"add_(?:executable|library|custom_target)\(\s*([\w-]+)", text)}

    def exists(self, rel: str) -> bool:
        """rel (glob characters allowed) names a file or folder of the tree."""
        rel = rel.rstrip("/")
        if not any(c in rel for c in "*?["):
            return rel in self.file_set or rel in self.dirs
        regex = re.compile(fnmatch.translate(rel).replace(".*.*/", "(?:.*/)?"))  # ** spans folders
        return any(regex.match(p) for p in self.files) or any(regex.match(d) for d in self.dirs)

    def exists_as_tail(self, rel: str) -> bool:
        rel = rel.rstrip("/")
        if not any(c in rel for c in "*?["):
            return any(p.endswith("/" + rel) for p in self.files) or any(d.endswith("/" + rel) for d in self.dirs)
        return self.exists("**/" + rel)

    @functools.cached_property
    def gtests(self) -> dict[str, dict]:
        """{suite: {"tests": names, "prefixes": instantiation prefixes, "param": TEST_P}} of tests/."""
        suites: dict[str, dict] = {}
        definition = re.compile(r"\b(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\(\s*(\w+)\s*,\s*(\w+)\s*\)")
        instantiation = re.compile(r"\bINSTANTIATE_(?:TYPED_)?TEST_SUITE_P\(\s*(\w+)\s*,\s*(\w+)")
        for rel, text in self.texts.items():
            if rel.startswith("tests/") and Path(rel).suffix in SOURCE_EXTENSIONS:
                for macro, suite, name in definition.findall(text):
                    entry = suites.setdefault(suite, {"tests": set(), "prefixes": set(), "param": False})
                    entry["tests"].add(name)
                    entry["param"] |= macro.endswith("_P")
                for prefix, suite in instantiation.findall(text):
                    suites.setdefault(suite, {"tests": set(), "prefixes": set(), "param": True})["prefixes"].add(
                        prefix)
        return suites

    @functools.cached_property
    def gtest_full_names(self) -> list[tuple[str, bool]]:
        """(the full name gtest matches filters against, parameterized); a parameter is written PARAM."""
        names = []
        for suite, entry in self.gtests.items():
            for name in entry["tests"]:
                if not entry["param"]:
                    names.append((f"{suite}.{name}", False))
                for prefix in sorted(entry["prefixes"]) if entry["param"] else []:
                    names.append((f"{prefix}/{suite}.{name}/PARAM", True))
        return names

    @functools.cached_property
    def python_tests(self) -> set[str]:
        return {name for rel, text in self.texts.items() if rel.endswith(".py") and
                rel.startswith(("tests/", "tools/", "bench/")) for name in re.findall(r"^\s*def (test_\w+)", text, re.M)}

    @functools.cached_property
    def recipes(self) -> set[str]:
        return {p[len("recipes/"):-len(".yaml")] for p in self.files if p.startswith("recipes/") and p.endswith(".yaml")}

    # -- what the program says
    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "SLURM_NTASKS", "SLURM_PROCID")}
        return subprocess.run([self.stepgraph, *args], capture_output=True, text=True, timeout=60, env=env,
                              cwd=self.root)

    @functools.cached_property
    def config_keys(self) -> dict[str, set[str]]:
        """{section: keys} as `stepgraph config show` prints them."""
        done = self.run("config", "show", "llama/tiny")
        if done.returncode != 0:
            raise RuntimeError(f"stepgraph config show failed ({done.returncode}): {done.stderr}")
        sections: dict[str, set[str]] = {}
        for line in done.stdout.splitlines():
            if re.fullmatch(r"\w+:\s*", line):
                sections[line.split(":")[0]] = set()
            elif re.match(r"  \w+:", line) and sections:
                sections[list(sections)[-1]].add(line.split(":")[0].strip())
        if not sections.get("model") or not sections.get("checkpoint"):
            raise RuntimeError("stepgraph config show printed no model or checkpoint keys:\n" + done.stdout)
        return sections

    def unknown_keys(self, keys: set[str]) -> set[str]:
        """The section.key of `keys` stepgraph refuses as unknown overrides. `config show` stops at the first bad
        override it names: one run for all, then one more for each key it refuses."""
        ask = sorted(k for k in keys if k.split(".")[1] not in self.config_keys[k.split(".")[0]])
        unknown = set()
        while ask:
            done = self.run("config", "show", "llama/tiny", *(f"{k}=null" for k in ask))
            if done.returncode == 0:
                break
            named = re.search(r"override '([\w.]+)=null': (.*)", done.stderr)
            if not named or named.group(1) not in ask:
                raise RuntimeError(f"stepgraph config show with {ask} failed naming none of them: {done.stderr}")
            if f"unknown key '{named.group(1)}'" in named.group(2):
                unknown.add(named.group(1))
            ask.remove(named.group(1))  # unknown, or a key whose value null is refused: a key
        return unknown

    @functools.cached_property
    def commands(self) -> dict[str, set[str]]:
        """{command: its flags} for every stepgraph subcommand (and subcommand of one) as --help lists them."""
        top = self.run("--help").stdout
        result: dict[str, set[str]] = {}
        for name in help_section(top, "Subcommands:"):
            text = self.run(name, "--help").stdout
            result[name] = help_flags(text)
            for sub in help_section(text, "Subcommands:"):
                result[f"{name} {sub}"] = help_flags(self.run(name, sub, "--help").stdout)
        bridge = self.root / "src" / "bench" / "bridge_flags.cpp"
        if "bench" in result and bridge.is_file():  # the Bridge flags bench's --help sums up as "(66 flags)"
            for group in re.findall(r"\{\{(\"-[^}]*)\}", bridge.read_text()):
                result["bench"] |= set(re.findall(r"\"(-[\w-]+)\"", group))
        if "--compare" not in result.get("bench", ()) or "--cpu" not in result.get("train", ()):
            raise RuntimeError("stepgraph --help lists no bench --compare or train --cpu:\n" + top)
        return result

    @functools.cached_property
    def gpu_parts(self) -> set[str]:
        """scripts/gpu.sh's parts, as it lists them for one it does not know (it exits before any GPU work)."""
        done = subprocess.run(["bash", str(self.root / "scripts" / "gpu.sh"), "no_such_part"], capture_output=True,
                              text=True, timeout=60, cwd=self.root)
        match = re.search(r"the parts are: ([\w ]+)", done.stderr)
        if done.returncode == 0 or not match:
            raise RuntimeError(f"scripts/gpu.sh no_such_part did not list the parts ({done.returncode}): {done.stderr}")
        return set(match.group(1).split())


def help_section(help_text: str, title: str) -> list[str]:
    """The first word of each line of a CLI11 --help section (Subcommands:)."""
    lines = help_text.splitlines()
    words: list[str] = []
    for line in lines[lines.index(title) + 1:] if title in lines else []:
        if not line.strip():
            break
        match = re.match(r"  (\w+)", line)
        if match:
            words.append(match.group(1))
    return words


def help_flags(help_text: str) -> set[str]:
    """Every -x / --long flag a --help text names at the start of an option line."""
    flags = set()
    for line in help_text.splitlines():
        match = re.match(r"\s+(-[\w-]+(?:,\s*-[\w-]+)*)", line)
        if match:
            flags |= set(re.split(r",\s*", match.group(1)))
    return flags


# ---------------------------------------------------------------------------------------------------------------
# The checks.


@functools.cache
def tree_of(root: Path, stepgraph: str) -> Tree:
    return Tree(root, stepgraph)
