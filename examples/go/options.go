package flashkv

// Plain-value options of load, session, sampling and generation. The Default* constructors read the library's
// fkv_*_init, so the header stays the one source of defaults.

/*
#include <flashkv.h>
*/
import "C"

type Device int32

const (
	DeviceCPU  Device = C.FKV_DEVICE_CPU
	DeviceCUDA Device = C.FKV_DEVICE_CUDA // refused (StatusUnsupported) until the CUDA engine lands
)

// Numerics: clean is fp32 with the KV quantizers off (agrees with the numpy reference); faithful runs the
// checkpoint's storage formats and cast points.
type Numerics int32

const (
	NumericsClean    Numerics = C.FKV_NUMERICS_CLEAN
	NumericsFaithful Numerics = C.FKV_NUMERICS_FAITHFUL
)

// Prefill: exact runs every prompt row through every layer; CED is the causal encoder-decoder prefill of a
// session's first append. PrefillModel (session options only) takes the model's.
type Prefill int32

const (
	PrefillModel Prefill = C.FKV_PREFILL_MODEL
	PrefillExact Prefill = C.FKV_PREFILL_EXACT
	PrefillCED   Prefill = C.FKV_PREFILL_CED
)

type LogLevel int32

const (
	LogDebug   LogLevel = C.FKV_LOG_DEBUG
	LogInfo    LogLevel = C.FKV_LOG_INFO
	LogWarning LogLevel = C.FKV_LOG_WARNING
	LogError   LogLevel = C.FKV_LOG_ERROR
)

type StopReason int32

const (
	StopMaxTokens   StopReason = C.FKV_STOP_MAX_TOKENS
	StopToken       StopReason = C.FKV_STOP_TOKEN
	StopContextFull StopReason = C.FKV_STOP_CONTEXT_FULL
)

func (r StopReason) String() string {
	switch r {
	case StopMaxTokens:
		return "max_tokens"
	case StopToken:
		return "stop_token"
	case StopContextFull:
		return "context_full"
	}
	return "unknown"
}

type LoadOptions struct {
	Device       Device
	Threads      int32 // backend worker threads; 0: the hardware's concurrency
	Numerics     Numerics
	Prefill      Prefill // the default of the model's sessions: PrefillExact or PrefillCED
	PrefillChunk int64   // rows per prefill forward; > 0
	// Log, when set, receives the library's lines about the load; returning false cancels it.
	Log func(level LogLevel, message string) bool
}

type SessionOptions struct {
	Prefill      Prefill // PrefillModel: the model's
	PrefillChunk int64   // rows per prefill forward; 0: the model's
}

// SamplingParams: filters apply in this order: penalties, temperature, top-k, top-p, min-p (docs/sampling.md).
type SamplingParams struct {
	Temperature       float32 // 0: greedy (argmax, lowest id among ties)
	TopK              int32   // 0: off
	TopP              float32 // 1: off; in (0, 1]
	MinP              float32 // 0: off; in [0, 1]
	RepetitionPenalty float32 // 1: off; > 0
	PresencePenalty   float32
	FrequencyPenalty  float32
	Seed              uint64 // same seed, same session, same draws
}

type GenerateOptions struct {
	Sampling   SamplingParams
	MaxTokens  int64   // tokens to generate at most; >= 0 (0: prefill only)
	StopTokens []int32 // ids in [0, vocab) that end generation (the stop token is kept)
	StopAtEOS  bool    // also stop at the config's eos_token_id
	// OnToken, when set, sees each token before it is appended; returning false cancels (StatusCancelled).
	OnToken func(token int32) bool
	// OnProgress, when set, sees the prompt's prefill progress after each chunk; returning false cancels.
	OnProgress func(done, total int64) bool
}

func DefaultLoadOptions() LoadOptions {
	var raw C.fkv_load_options
	C.fkv_load_options_init(&raw)
	return loadOptionsOf(&raw)
}

// loadOptionsOf is the inverse of LoadOptions.raw (the header's defaults or a loaded model's options).
func loadOptionsOf(raw *C.fkv_load_options) LoadOptions {
	return LoadOptions{
		Device:       Device(raw.device),
		Threads:      int32(raw.threads),
		Numerics:     Numerics(raw.numerics),
		Prefill:      Prefill(raw.prefill),
		PrefillChunk: int64(raw.prefill_chunk),
	}
}

func DefaultSessionOptions() SessionOptions {
	var raw C.fkv_session_options
	C.fkv_session_options_init(&raw)
	return SessionOptions{Prefill: Prefill(raw.prefill), PrefillChunk: int64(raw.prefill_chunk)}
}

func DefaultSamplingParams() SamplingParams {
	var raw C.fkv_sampling_params
	C.fkv_sampling_params_init(&raw)
	return SamplingParams{
		Temperature:       float32(raw.temperature),
		TopK:              int32(raw.top_k),
		TopP:              float32(raw.top_p),
		MinP:              float32(raw.min_p),
		RepetitionPenalty: float32(raw.repetition_penalty),
		PresencePenalty:   float32(raw.presence_penalty),
		FrequencyPenalty:  float32(raw.frequency_penalty),
		Seed:              uint64(raw.seed),
	}
}

// GreedySampling is argmax sampling (temperature 0), the rest at defaults.
func GreedySampling() SamplingParams {
	params := DefaultSamplingParams()
	params.Temperature = 0
	return params
}

func DefaultGenerateOptions() GenerateOptions {
	var raw C.fkv_generate_options
	C.fkv_generate_options_init(&raw)
	return GenerateOptions{
		Sampling:  DefaultSamplingParams(),
		MaxTokens: int64(raw.max_tokens),
		StopAtEOS: raw.stop_at_eos != 0,
	}
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// The C structs below hold no pointers (the bridge sets callbacks and buffers on the C side).

func (o *LoadOptions) raw() C.fkv_load_options {
	var raw C.fkv_load_options
	C.fkv_load_options_init(&raw)
	raw.device = C.int32_t(o.Device)
	raw.threads = C.int32_t(o.Threads)
	raw.numerics = C.int32_t(o.Numerics)
	raw.prefill = C.int32_t(o.Prefill)
	raw.prefill_chunk = C.int64_t(o.PrefillChunk)
	return raw
}

func (o *SessionOptions) raw() C.fkv_session_options {
	var raw C.fkv_session_options
	C.fkv_session_options_init(&raw)
	raw.prefill = C.int32_t(o.Prefill)
	raw.prefill_chunk = C.int64_t(o.PrefillChunk)
	return raw
}

func (p *SamplingParams) raw() C.fkv_sampling_params {
	var raw C.fkv_sampling_params
	C.fkv_sampling_params_init(&raw)
	raw.temperature = C.float(p.Temperature)
	raw.top_k = C.int32_t(p.TopK)
	raw.top_p = C.float(p.TopP)
	raw.min_p = C.float(p.MinP)
	raw.repetition_penalty = C.float(p.RepetitionPenalty)
	raw.presence_penalty = C.float(p.PresencePenalty)
	raw.frequency_penalty = C.float(p.FrequencyPenalty)
	raw.seed = C.uint64_t(p.Seed)
	return raw
}

func (o *GenerateOptions) raw() C.fkv_generate_options {
	var raw C.fkv_generate_options
	C.fkv_generate_options_init(&raw)
	raw.stop_at_eos = cBool(o.StopAtEOS)
	raw.max_tokens = C.int64_t(o.MaxTokens)
	return raw
}
