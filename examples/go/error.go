package flashkv

/*
#include <flashkv.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// Status is the C ABI's fkv_status (equal to flashkv::ErrorCode of the C++ API). Values are stable.
type Status int32

const (
	StatusOK                Status = C.FKV_OK
	StatusInvalidArgument   Status = C.FKV_ERR_INVALID_ARGUMENT
	StatusInvalidConfig     Status = C.FKV_ERR_INVALID_CONFIG
	StatusInvalidCheckpoint Status = C.FKV_ERR_INVALID_CHECKPOINT
	StatusNotFound          Status = C.FKV_ERR_NOT_FOUND
	StatusIO                Status = C.FKV_ERR_IO
	StatusUnsupported       Status = C.FKV_ERR_UNSUPPORTED
	StatusDevice            Status = C.FKV_ERR_DEVICE
	StatusOutOfMemory       Status = C.FKV_ERR_OUT_OF_MEMORY
	StatusCancelled         Status = C.FKV_ERR_CANCELLED
	StatusInternal          Status = C.FKV_ERR_INTERNAL
)

// String is the library's stable lower-case name ("invalid_argument", ...; "unknown" for codes it does not know).
func (s Status) String() string {
	return C.GoString(C.fkv_status_string(C.fkv_status(s)))
}

// Error is a failed flashkv call: its status and the library's message naming what is at fault.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("flashkv %s: %s", e.Status, e.Message)
}

// IsStatus reports whether err is (or wraps) an *Error with the given status.
func IsStatus(err error, status Status) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// call runs one C call and turns a failure into an *Error with fkv_last_error(), which is thread-local: the
// goroutine stays on its OS thread from the call until the message is read.
func call(f func() C.fkv_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	status := f()
	if status == C.FKV_OK {
		return nil
	}
	return &Error{Status: Status(status), Message: C.GoString(C.fkv_last_error())}
}

func closedError(what string) error {
	return &Error{Status: StatusInvalidArgument, Message: what + " used after Close"}
}
