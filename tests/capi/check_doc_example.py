#!/usr/bin/env python3
"""Compiles the C example of docs/c-abi.md (the block between the c-example markers) against the built
libflashkv.so and runs it on a checkpoint: it must exit 0 and print 8 token ids. Keeps the page's example true.

    check_doc_example.py DOC C_COMPILER INCLUDE_DIR LIBRARY CHECKPOINT WORK_DIR"""
import json
import pathlib
import re
import subprocess
import sys


def example_of(doc: pathlib.Path) -> str:
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"<!-- c-example:begin.*?-->\s*```c\n(.*?)```\s*<!-- c-example:end -->", text, re.S)
    if match is None:
        sys.exit(f"{doc}: no ```c block between the c-example markers")
    return match.group(1)


def main() -> int:
    doc, cc, include_dir, library, checkpoint, work = sys.argv[1:7]
    work_dir = pathlib.Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    source, program = work_dir / "doc_example.c", work_dir / "doc_example"
    source.write_text(example_of(pathlib.Path(doc)), encoding="utf-8")
    library_dir = str(pathlib.Path(library).parent)
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", f"-I{include_dir}", str(source),
                    f"-L{library_dir}", "-lflashkv", f"-Wl,-rpath,{library_dir}", "-o", str(program)], check=True)
    run = subprocess.run([str(program), checkpoint], capture_output=True, text=True)
    print(run.stdout, run.stderr, sep="")
    tokens = run.stdout.split()
    eos = str(json.loads((pathlib.Path(checkpoint) / "config.json").read_text())["eos_token_id"])
    # The example keeps the default stop at eos, and a random tiny model may say eos before 8 tokens.
    complete = len(tokens) == 8 or (0 < len(tokens) < 8 and tokens[-1] == eos)
    if run.returncode != 0 or not complete or not all(t.isdigit() for t in tokens):
        print(f"the example should exit 0 and print 8 token ids (fewer only when the last is eos {eos}); "
              f"it exited {run.returncode}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
