#!/usr/bin/env python3
"""Checks that libflashkv.so exports exactly the C ABI: the dynamic symbols it defines (nm -D --defined-only),
the FKV_API functions declared in flashkv.h and the list in capi/flashkv.abi must be the same set.

    check_exports.py LIBRARY HEADER ABI_LIST

An exported symbol missing from the list is an unintended ABI addition (or a leak of an internal symbol); a
listed symbol the library lacks is an ABI break; a declared function outside the list was forgotten in one
of the two. Exit status 1 with the differences on any mismatch."""
import re
import subprocess
import sys


def exported(library: str) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    # "ADDRESS TYPE NAME"; symbol versions, when any, follow the name after '@'.
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def declared(header: str) -> set[str]:
    text = open(header, encoding="utf-8").read()
    return set(re.findall(r"FKV_API\s[^;(]*?\b(fkv_\w+)\s*\(", text))


def listed(abi_list: str) -> set[str]:
    lines = (line.strip() for line in open(abi_list, encoding="utf-8"))
    return {line for line in lines if line and not line.startswith("#")}


def report(title: str, names: set[str]) -> None:
    if names:
        print(f"{title}:\n  " + "\n  ".join(sorted(names)))


def main() -> int:
    library, header, abi_list = sys.argv[1:4]
    lib, decl, abi = exported(library), declared(header), listed(abi_list)
    if lib == decl == abi:
        print(f"libflashkv exports the {len(abi)} symbols of flashkv.abi, all declared in flashkv.h")
        return 0
    report(f"exported by {library} but not in {abi_list}", lib - abi)
    report(f"in {abi_list} but not exported by {library}", abi - lib)
    report(f"declared FKV_API in {header} but not in {abi_list}", decl - abi)
    report(f"in {abi_list} but not declared in {header}", abi - decl)
    return 1


if __name__ == "__main__":
    sys.exit(main())
