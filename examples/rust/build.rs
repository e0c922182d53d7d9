//! Tells rustc where libflashkv.so is and embeds that directory as an rpath, so the tests and examples run from
//! the build tree without LD_LIBRARY_PATH.
//!
//! FLASHKV_LIB_DIR names the directory holding libflashkv.so; without it, FLASHKV_BUILD_DIR, then
//! <repository>/build (CMake writes the library at the top of the build tree).
use std::env;
use std::path::PathBuf;

fn library_dir() -> PathBuf {
    if let Some(dir) = env::var_os("FLASHKV_LIB_DIR") {
        return PathBuf::from(dir);
    }
    env::var_os("FLASHKV_BUILD_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../../build")
    })
}

fn main() {
    println!("cargo:rerun-if-env-changed=FLASHKV_LIB_DIR");
    println!("cargo:rerun-if-env-changed=FLASHKV_BUILD_DIR");
    let dir = library_dir();
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=flashkv");
    // Applies to every binary this package links: examples, tests and doc tests.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // Relinks when the library is rebuilt.
    println!("cargo:rerun-if-changed={}", dir.join("libflashkv.so").display());
}
