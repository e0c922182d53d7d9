package flashkv

// structSizes pairs, for each options struct, the struct_size the library's *_init writes (its sizeof) with the
// size of cgo's view of the same struct: a test checks they agree.

/*
#include <flashkv.h>
*/
import "C"

import "unsafe"

func structSizes() map[string][2]uintptr {
	var load C.fkv_load_options
	var session C.fkv_session_options
	var sampling C.fkv_sampling_params
	var generate C.fkv_generate_options
	C.fkv_load_options_init(&load)
	C.fkv_session_options_init(&session)
	C.fkv_sampling_params_init(&sampling)
	C.fkv_generate_options_init(&generate)
	return map[string][2]uintptr{
		"fkv_load_options":     {uintptr(load.struct_size), unsafe.Sizeof(load)},
		"fkv_session_options":  {uintptr(session.struct_size), unsafe.Sizeof(session)},
		"fkv_sampling_params":  {uintptr(sampling.struct_size), unsafe.Sizeof(sampling)},
		"fkv_generate_options": {uintptr(generate.struct_size), unsafe.Sizeof(generate)},
	}
}
