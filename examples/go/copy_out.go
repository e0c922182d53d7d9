package flashkv

// The header's count convention for variable-length outputs: a first call with a NULL buffer and *count == 0 asks
// for the size, a second call fills a buffer of that size.

/*
#include <flashkv.h>
*/
import "C"

func copyOut[T any](query func(buffer *T, count *C.uint64_t) C.fkv_status) ([]T, error) {
	var count C.uint64_t
	if err := call(func() C.fkv_status { return query(nil, &count) }); err != nil {
		return nil, err
	}
	out := make([]T, count)
	if count == 0 {
		return out, nil
	}
	filled := count
	if err := call(func() C.fkv_status { return query(&out[0], &filled) }); err != nil {
		return nil, err
	}
	return out[:filled], nil
}
