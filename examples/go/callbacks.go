package flashkv

// Go closures as C callbacks. The C side gets an exported trampoline and, as user_data, a cgo.Handle (an integer,
// so no Go pointer crosses into C) naming a callback value that lives for the duration of the C call. A panic must
// not unwind through C frames: the trampoline recovers it, cancels the C call, and the caller re-raises it after
// the call returns (callback.rethrow).

/*
#include <flashkv.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

type callback struct {
	onToken    func(token int32) bool
	onProgress func(done, total int64) bool
	onLog      func(level LogLevel, message string) bool
	panicked   interface{}
}

// handle registers the callback for one C call; release it with h.Delete() after the call.
func (c *callback) handle() cgo.Handle {
	return cgo.NewHandle(c)
}

// run calls f, turning a panic into a cancellation; it returns the C verdict (0 continue, 1 cancel).
func (c *callback) run(f func() bool) (verdict C.int32_t) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked = p
			verdict = 1
		}
	}()
	if f() {
		return 0
	}
	return 1
}

// rethrow re-raises a panic a callback raised during the C call.
func (c *callback) rethrow() {
	if c.panicked != nil {
		panic(c.panicked)
	}
}

func callbackOf(userData unsafe.Pointer) *callback {
	return cgo.Handle(uintptr(userData)).Value().(*callback)
}

//export flashkvGoToken
func flashkvGoToken(userData unsafe.Pointer, token C.int32_t) C.int32_t {
	c := callbackOf(userData)
	return c.run(func() bool { return c.onToken(int32(token)) })
}

//export flashkvGoProgress
func flashkvGoProgress(userData unsafe.Pointer, done, total C.int64_t) C.int32_t {
	c := callbackOf(userData)
	return c.run(func() bool { return c.onProgress(int64(done), int64(total)) })
}

//export flashkvGoLog
func flashkvGoLog(userData unsafe.Pointer, level C.int32_t, message *C.char) C.int32_t {
	c := callbackOf(userData)
	text := ""
	if message != nil {
		text = C.GoString(message)
	}
	return c.run(func() bool { return c.onLog(LogLevel(level), text) })
}
