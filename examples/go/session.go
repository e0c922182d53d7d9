package flashkv

// Session: one token timeline over one KV state. Not safe for concurrent use: one goroutine at a time.

/*
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Generation is what Generate produced: the tokens in order (a final stop token included) and why it stopped.
type Generation struct {
	Tokens     []int32
	StopReason StopReason
}

type Session struct {
	raw *C.fkv_session
}

// Close releases the session. Snapshots taken from it stay valid. Idempotent.
func (s *Session) Close() {
	if s == nil {
		return
	}
	C.fkv_session_free(s.raw)
	s.raw = nil
}

func (s *Session) live() error {
	if s == nil || s.raw == nil {
		return closedError("Session")
	}
	return nil
}

// tokensPointer is the C view of a token slice: its first element, or NULL when empty. The slice holds no Go
// pointers, so C may read it during the call.
func tokensPointer(tokens []int32) *C.int32_t {
	if len(tokens) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&tokens[0]))
}

// Append runs tokens through the model (prefill in chunks). An empty slice, an id outside [0, vocab) or a sequence
// past MaxPositionEmbeddings is an error and leaves the session unchanged.
func (s *Session) Append(tokens []int32) error {
	return s.AppendWithProgress(tokens, nil)
}

// AppendWithProgress is Append calling progress(done, total) after each prefill chunk (nil: none); returning false
// cancels (StatusCancelled) and the session keeps the chunks done.
func (s *Session) AppendWithProgress(tokens []int32, progress func(done, total int64) bool) error {
	if err := s.live(); err != nil {
		return err
	}
	var handle C.uintptr_t
	var c *callback
	if progress != nil {
		c = &callback{onProgress: progress}
		h := c.handle()
		defer h.Delete()
		handle = C.uintptr_t(h)
	}
	err := call(func() C.fkv_status {
		return C.flashkv_go_append(s.raw, tokensPointer(tokens), C.uint64_t(len(tokens)), handle)
	})
	if c != nil {
		c.rethrow()
	}
	return err
}

// Logits are the fp32 logits predicting the next token (VocabSize entries). An error on an empty session.
func (s *Session) Logits() ([]float32, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	return copyOut(func(buffer *float32, count *C.uint64_t) C.fkv_status {
		return C.fkv_session_logits(s.raw, (*C.float)(unsafe.Pointer(buffer)), count)
	})
}

// Sample draws the next token from the logits without appending it. Deterministic in (params, tokens).
// params nil: defaults.
func (s *Session) Sample(params *SamplingParams) (int32, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	if params == nil {
		defaults := DefaultSamplingParams()
		params = &defaults
	}
	raw := params.raw()
	var token C.int32_t
	err := call(func() C.fkv_status { return C.fkv_session_sample(s.raw, &raw, &token) })
	return int32(token), err
}

// Generate appends the prompt (may be empty to continue), then samples and appends up to options.MaxTokens tokens.
// options nil: defaults. When options.OnToken cancels, the error has StatusCancelled; the tokens appended before
// it are kept in the session (see Tokens).
func (s *Session) Generate(prompt []int32, options *GenerateOptions) (Generation, error) {
	if err := s.live(); err != nil {
		return Generation{}, err
	}
	if options == nil {
		defaults := DefaultGenerateOptions()
		options = &defaults
	}
	generated := []int32{}
	// Tokens are collected here rather than in a tokens_out buffer, which would need MaxTokens capacity.
	tokens := &callback{onToken: func(token int32) bool {
		if options.OnToken != nil && !options.OnToken(token) {
			return false
		}
		generated = append(generated, token)
		return true
	}}
	tokenHandle := tokens.handle()
	defer tokenHandle.Delete()
	var progressHandle C.uintptr_t
	progress := &callback{onProgress: options.OnProgress}
	if options.OnProgress != nil {
		h := progress.handle()
		defer h.Delete()
		progressHandle = C.uintptr_t(h)
	}
	raw := options.raw()
	sampling := options.Sampling.raw()
	stopReason := C.int32_t(StopMaxTokens)
	err := call(func() C.fkv_status {
		return C.flashkv_go_generate(s.raw, tokensPointer(prompt), C.uint64_t(len(prompt)), raw, &sampling,
			tokensPointer(options.StopTokens), C.uint64_t(len(options.StopTokens)), C.uintptr_t(tokenHandle),
			progressHandle, &stopReason)
	})
	tokens.rethrow()
	progress.rethrow()
	if err != nil {
		return Generation{}, err
	}
	return Generation{Tokens: generated, StopReason: StopReason(stopReason)}, nil
}

// Rewind drops the last n tokens, exactly. Beyond the session's length or window history: an error, unchanged.
func (s *Session) Rewind(n int64) error {
	if err := s.live(); err != nil {
		return err
	}
	return call(func() C.fkv_status { return C.fkv_session_rewind(s.raw, C.int64_t(n)) })
}

// Len is the number of tokens the session holds.
func (s *Session) Len() (int64, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var length C.int64_t
	err := call(func() C.fkv_status { return C.fkv_session_length(s.raw, &length) })
	return int64(length), err
}

// Tokens are the session's token ids, oldest first.
func (s *Session) Tokens() ([]int32, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	return copyOut(func(buffer *int32, count *C.uint64_t) C.fkv_status {
		return C.fkv_session_tokens(s.raw, (*C.int32_t)(unsafe.Pointer(buffer)), count)
	})
}

// KVBytes is the bytes of KV state the session holds now.
func (s *Session) KVBytes() (int64, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var bytes C.int64_t
	err := call(func() C.fkv_status { return C.fkv_session_kv_bytes(s.raw, &bytes) })
	return int64(bytes), err
}

// KV snapshots the session's KV state; the session stays usable and the snapshot outlives it. Close the KV.
func (s *Session) KV() (*KV, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	var raw *C.fkv_kv
	if err := call(func() C.fkv_status { return C.fkv_session_kv(s.raw, &raw) }); err != nil {
		return nil, err
	}
	return &KV{raw: raw}, nil
}

// Restore replaces the session's state with the snapshot's (exact continuation). A snapshot of another load is
// an error. The snapshot is not consumed.
func (s *Session) Restore(kv *KV) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := kv.live(); err != nil {
		return err
	}
	return call(func() C.fkv_status { return C.fkv_session_restore(s.raw, kv.raw) })
}

// Decode appends tokens[i] to sessions[i] for every i in one batched forward; equal to appending them one by one.
// The sessions must be distinct and of one model; the caller owns all of them during the call. On an error no
// session changes.
func Decode(sessions []*Session, tokens []int32) error {
	if len(sessions) != len(tokens) {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("Decode: %d sessions but %d tokens", len(sessions), len(tokens))}
	}
	if len(sessions) == 0 {
		return nil
	}
	raw := make([]*C.fkv_session, len(sessions))
	for i, s := range sessions {
		if s == nil || s.raw == nil {
			return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("Decode: session %d is nil or closed", i)}
		}
		raw[i] = s.raw
	}
	return call(func() C.fkv_status {
		return C.fkv_decode(&raw[0], tokensPointer(tokens), C.uint64_t(len(tokens)))
	})
}
