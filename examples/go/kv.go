package flashkv

// KV: an immutable snapshot of a session's KV state. Safe for concurrent reads by any number of goroutines, except
// Close. Fork is another handle to the same snapshot, without a copy; the snapshot is freed with its last handle.

/*
#include <flashkv.h>
*/
import "C"

import "unsafe"

type KV struct {
	raw *C.fkv_kv
}

// Close releases this handle. Idempotent.
func (k *KV) Close() {
	if k == nil {
		return
	}
	C.fkv_kv_free(k.raw)
	k.raw = nil
}

func (k *KV) live() error {
	if k == nil || k.raw == nil {
		return closedError("KV")
	}
	return nil
}

// Fork returns another handle to the same snapshot; close both.
func (k *KV) Fork() (*KV, error) {
	if err := k.live(); err != nil {
		return nil, err
	}
	var raw *C.fkv_kv
	if err := call(func() C.fkv_status { return C.fkv_kv_fork(k.raw, &raw) }); err != nil {
		return nil, err
	}
	return &KV{raw: raw}, nil
}

// Tokens are the snapshot's token ids, oldest first.
func (k *KV) Tokens() ([]int32, error) {
	if err := k.live(); err != nil {
		return nil, err
	}
	return copyOut(func(buffer *int32, count *C.uint64_t) C.fkv_status {
		return C.fkv_kv_tokens(k.raw, (*C.int32_t)(unsafe.Pointer(buffer)), count)
	})
}

// Bytes is the bytes of KV state the snapshot holds.
func (k *KV) Bytes() (int64, error) {
	if err := k.live(); err != nil {
		return 0, err
	}
	var bytes C.int64_t
	err := call(func() C.fkv_status { return C.fkv_kv_bytes(k.raw, &bytes) })
	return int64(bytes), err
}
