// Package flashkv is a Go binding over the flashkv C ABI (capi/flashkv.h): load a DeepSeek-V4.1 checkpoint, run
// sessions, snapshot KV state.
//
// Ownership: Model, Session and KV each own one C handle, released by an explicit Close (there are no finalizers:
// a model holds gigabytes, and its release should not wait for the garbage collector). Close is idempotent; a
// method called after Close returns an *Error with StatusInvalidArgument. Sessions and snapshots keep the model's
// weights alive, so a Model may be closed before them.
//
// Errors: every fallible call returns an error that is an *Error carrying the C status and the library's message
// naming the argument, file, field or tensor at fault. Compare statuses with errors.As or IsStatus.
//
// Threading: a Model and a KV may be used from any number of goroutines at once; a Session by one goroutine at a
// time. Callbacks run on the calling goroutine before the call returns; a panic in one cancels the C call and is
// re-raised once it has returned.
//
// Linking: the package links -lflashkv; point the linker at the build tree, e.g.
// CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" (scripts/test-bindings does).
package flashkv

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi
#cgo LDFLAGS: -lflashkv
#include <flashkv.h>
*/
import "C"

// ABIVersion is the FKV_ABI_VERSION ((major << 16) | minor) this package was written against.
const ABIVersion uint32 = C.FKV_ABI_VERSION

// LibraryABIVersion is the FKV_ABI_VERSION of the loaded libflashkv.
func LibraryABIVersion() uint32 {
	return uint32(C.fkv_abi_version())
}

// Version is the loaded library's release version, e.g. "0.1.0".
func Version() string {
	return C.GoString(C.fkv_version_string())
}
