package flashkv

// Model: a loaded checkpoint. Immutable; safe for concurrent use by any number of goroutines, except Close, which
// must not race with other calls on the same Model.

/*
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// Config holds the shape and token facts of the model's config.json.
type Config struct {
	NumHiddenLayers       int32
	VocabSize             int64 // token ids are [0, VocabSize)
	HiddenSize            int64
	NumAttentionHeads     int64
	HeadDim               int64
	QKRopeHeadDim         int64
	SlidingWindow         int64
	MaxPositionEmbeddings int64 // the longest sequence a session may hold
	NRoutedExperts        int64
	NSharedExperts        int64
	NumExpertsPerTok      int64
	MoEIntermediateSize   int64
	IndexTopK             int64
	BOSTokenID            int64
	EOSTokenID            int64
	NumNextNPredictLayers int32
	NumEngramLayers       int32
}

// Memory is the cache and weight footprint: the config's figures plus what this load holds.
type Memory struct {
	GlobalKVBytesPerToken          float64
	KVEntryBytes                   uint64
	IndexKeyBytes                  uint64
	WindowRowBytes                 uint64
	WindowBytesPerSession          uint64
	CompressorStateBytesPerSession uint64
	WeightBytesEstimate            uint64
	ResidentWeightBytes            uint64
	ParametersTotal                uint64
	ParametersActivePerToken       uint64
	WeightStorage                  string
}

type Model struct {
	raw *C.fkv_model
}

// Load reads the checkpoint directory (config.json + safetensors shards). options nil: defaults. The library
// checks this package's ABI version against its own and refuses a mismatch (StatusUnsupported).
func Load(path string, options *LoadOptions) (*Model, error) {
	if options == nil {
		defaults := DefaultLoadOptions()
		options = &defaults
	}
	if strings.IndexByte(path, 0) >= 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "checkpoint path " + path + " contains a NUL byte"}
	}
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	var logHandle C.uintptr_t
	var logs *callback
	if options.Log != nil {
		logs = &callback{onLog: options.Log}
		h := logs.handle()
		defer h.Delete()
		logHandle = C.uintptr_t(h)
	}
	var raw *C.fkv_model
	err := call(func() C.fkv_status { return C.flashkv_go_load(cPath, options.raw(), logHandle, &raw) })
	if logs != nil {
		logs.rethrow()
	}
	if err != nil {
		return nil, err
	}
	return &Model{raw: raw}, nil
}

// Close releases the model. Sessions and snapshots made from it stay valid. Idempotent.
func (m *Model) Close() {
	if m == nil {
		return
	}
	C.fkv_model_free(m.raw)
	m.raw = nil
}

func (m *Model) live() error {
	if m == nil || m.raw == nil {
		return closedError("Model")
	}
	return nil
}

// NewSession creates an empty session of the model. options nil: defaults.
func (m *Model) NewSession(options *SessionOptions) (*Session, error) {
	if err := m.live(); err != nil {
		return nil, err
	}
	if options == nil {
		defaults := DefaultSessionOptions()
		options = &defaults
	}
	raw := options.raw()
	var session *C.fkv_session
	if err := call(func() C.fkv_status { return C.fkv_session_create(m.raw, &raw, &session) }); err != nil {
		return nil, err
	}
	return &Session{raw: session}, nil
}

// LoadOptions returns the options the model was loaded with (without Log).
func (m *Model) LoadOptions() (LoadOptions, error) {
	if err := m.live(); err != nil {
		return LoadOptions{}, err
	}
	var raw C.fkv_load_options
	C.fkv_load_options_init(&raw)
	if err := call(func() C.fkv_status { return C.fkv_model_load_options(m.raw, &raw) }); err != nil {
		return LoadOptions{}, err
	}
	return loadOptionsOf(&raw), nil
}

func (m *Model) Config() (Config, error) {
	if err := m.live(); err != nil {
		return Config{}, err
	}
	var raw C.fkv_config
	raw.struct_size = C.uint32_t(unsafe.Sizeof(raw))
	if err := call(func() C.fkv_status { return C.fkv_model_config(m.raw, &raw) }); err != nil {
		return Config{}, err
	}
	return Config{
		NumHiddenLayers:       int32(raw.num_hidden_layers),
		VocabSize:             int64(raw.vocab_size),
		HiddenSize:            int64(raw.hidden_size),
		NumAttentionHeads:     int64(raw.num_attention_heads),
		HeadDim:               int64(raw.head_dim),
		QKRopeHeadDim:         int64(raw.qk_rope_head_dim),
		SlidingWindow:         int64(raw.sliding_window),
		MaxPositionEmbeddings: int64(raw.max_position_embeddings),
		NRoutedExperts:        int64(raw.n_routed_experts),
		NSharedExperts:        int64(raw.n_shared_experts),
		NumExpertsPerTok:      int64(raw.num_experts_per_tok),
		MoEIntermediateSize:   int64(raw.moe_intermediate_size),
		IndexTopK:             int64(raw.index_topk),
		BOSTokenID:            int64(raw.bos_token_id),
		EOSTokenID:            int64(raw.eos_token_id),
		NumNextNPredictLayers: int32(raw.num_nextn_predict_layers),
		NumEngramLayers:       int32(raw.num_engram_layers),
	}, nil
}

func (m *Model) Memory() (Memory, error) {
	if err := m.live(); err != nil {
		return Memory{}, err
	}
	var raw C.fkv_memory
	raw.struct_size = C.uint32_t(unsafe.Sizeof(raw))
	if err := call(func() C.fkv_status { return C.fkv_model_memory(m.raw, &raw) }); err != nil {
		return Memory{}, err
	}
	storage := ""
	if raw.weight_storage != nil {
		storage = C.GoString(raw.weight_storage) // owned by the model, alive during this copy
	}
	return Memory{
		GlobalKVBytesPerToken:          float64(raw.global_kv_bytes_per_token),
		KVEntryBytes:                   uint64(raw.kv_entry_bytes),
		IndexKeyBytes:                  uint64(raw.index_key_bytes),
		WindowRowBytes:                 uint64(raw.window_row_bytes),
		WindowBytesPerSession:          uint64(raw.window_bytes_per_session),
		CompressorStateBytesPerSession: uint64(raw.compressor_state_bytes_per_session),
		WeightBytesEstimate:            uint64(raw.weight_bytes_estimate),
		ResidentWeightBytes:            uint64(raw.resident_weight_bytes),
		ParametersTotal:                uint64(raw.parameters_total),
		ParametersActivePerToken:       uint64(raw.parameters_active_per_token),
		WeightStorage:                  storage,
	}, nil
}

// GlobalKVBytes is the exact global KV bytes of a sequence of `tokens` tokens.
func (m *Model) GlobalKVBytes(tokens uint64) (uint64, error) {
	if err := m.live(); err != nil {
		return 0, err
	}
	var bytes C.uint64_t
	err := call(func() C.fkv_status { return C.fkv_model_global_kv_bytes(m.raw, C.uint64_t(tokens), &bytes) })
	return uint64(bytes), err
}
