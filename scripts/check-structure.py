#!/usr/bin/env python3
"""Checks promises the code and docs make, run by scripts/lint.sh (CI):

1. Modules: a module's sources (src/NAME/*.cc, *.h) include only headers of NAME itself and
   of the modules its CMakeLists.txt lists (glm_module(NAME DEPS ...), or the glm_* libraries
   it links), so that a dependency never builds only because another module brought it in.
   Test files (*_test.cc, *_fuzz.cc, *_bench.cc and test helpers) may also use TEST_LIBS.
2. README's layout table names every module.
3. Flags: every `--flag` that docs/*.md or README.md names next to a glmserve command is parsed
   by some command (its name appears as a string in src/cli/*.cc).
4. Route errors: the gateway's error answers are written in one place (src/gateway/route.h):
   every route is registered through Routes (no `server_->get(` ... outside route.cc), an
   error body is built only by route.cc or inside a stream (an `sse_write(` line), and
   Routes::write_error is called only by route.cc and the server's hooks in gateway.cc.

Prints each violation and exits 1 if there is any.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
problems = []


def module_deps(cmake_text):
    """(deps, test_libs) of a module's CMakeLists.txt, as module names."""
    deps, test_libs = set(), set()
    m = re.search(r"glm_module\(\s*\w+(.*?)\)", cmake_text, re.S)
    if m:
        section = None
        for word in m.group(1).split():
            if word in ("DEPS", "LIBS", "TEST_LIBS"):
                section = word
            elif section == "DEPS":
                deps.add(word)
            elif section == "TEST_LIBS" and word.startswith("glm_"):
                test_libs.add(word[len("glm_"):])
    # Libraries linked by hand (src/cli): every glm_X on a target_link_libraries line.
    for line in re.findall(r"target_link_libraries\((.*?)\)", cmake_text, re.S):
        deps.update(w[len("glm_"):] for w in line.split() if w.startswith("glm_"))
    return deps, test_libs


def is_test_file(name):
    return re.search(r"_(test|fuzz|bench)\.cc$", name) or "test" in name or "fake" in name


modules = sorted(p.name for p in SRC.iterdir() if (p / "CMakeLists.txt").exists())
for mod in modules:
    deps, test_libs = module_deps((SRC / mod / "CMakeLists.txt").read_text())
    deps.discard("cli")
    for f in sorted((SRC / mod).glob("*")):
        if f.suffix not in (".cc", ".h"):
            continue
        allowed = {mod} | deps
        if is_test_file(f.name):
            allowed |= test_libs
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            inc = re.match(r'\s*#\s*include\s+"([a-z_0-9]+)/', line)
            if not inc or inc.group(1) in allowed:
                continue
            if inc.group(1) not in modules:  # a generated header (spirv/) or a build path
                continue
            problems.append(
                f"{f.relative_to(ROOT)}:{n}: includes {inc.group(1)}/ but "
                f"src/{mod}/CMakeLists.txt does not list it (add it to DEPS)")

# README's layout table names every module.
readme = (ROOT / "README.md").read_text()
for mod in modules:
    if f"| `src/{mod}` |" not in readme:
        problems.append(f"README.md: the layout table does not name src/{mod}")

# Flags: the names the commands parse, as strings in src/cli.
cli_text = "".join(p.read_text() for p in (SRC / "cli").glob("*.cc"))
parsed = set(re.findall(r'"([a-z][a-z0-9-]*)"', cli_text))
# Flags written bare (`--flag`) or after glmserve (`glmserve CMD ... --flag`) in a code span; a
# span that starts with another program (ctest, llama-bench, a script) is that program's.
# Bare flags of other programs that the docs name in their sentences:
FOREIGN = {"mmap"}  # llama-bench --mmap 0 (docs/performance.md)
doc_files = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
for doc in doc_files:
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        for span in re.findall(r"`([^`]+)`", line):
            words = span.split()
            if not words or not (words[0].startswith("--") or words[0].endswith("glmserve")):
                continue
            for flag in re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)(?![\w])", span):
                if flag not in parsed and flag not in FOREIGN:
                    problems.append(f"{doc.relative_to(ROOT)}:{n}: names --{flag}, which no "
                                    "glmserve command parses (src/cli)")

# Route errors: one writer (src/gateway/route.h).
GATEWAY = SRC / "gateway"
for f in sorted(GATEWAY.glob("*.cc")):
    if is_test_file(f.name) or f.name == "route.cc":
        continue
    for n, line in enumerate(f.read_text().splitlines(), 1):
        where = f"{f.relative_to(ROOT)}:{n}"
        if re.search(r"server_->(get|post|patch|del|route)\(", line):
            problems.append(f"{where}: registers a route on the server directly; use routes_-> "
                            "(gateway/route.h), whose wrapper writes the route's errors")
        if re.search(r"(openai|anthropic)_error_json\(", line) and "sse_write(" not in line:
            problems.append(f"{where}: builds an error body by hand; return the Status from the "
                            "route (gateway/route.h writes it)")
        if re.search(r"\bwrite_error\(", line) and f.name != "gateway.cc":
            problems.append(f"{where}: writes an error answer by hand; return the Status from "
                            "the route (gateway/route.h writes it)")
        if re.search(r"\b(set_json_error|write_json_error)\(", line):
            problems.append(f"{where}: {line.strip()}: return the Status from the route instead")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"structure: {len(modules)} modules include only what they list; "
      f"docs name only parsed flags; route errors have one writer")
