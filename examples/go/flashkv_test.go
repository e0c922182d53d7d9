package flashkv

// The Go wrapper against independent oracles on a tiny checkpoint generated for this run: greedy tokens equal the
// numpy reference (clean numerics) and `flashkv run` (faithful); the session laws hold through the wrapper
// (snapshot/restore, batched decode, rewind); every misuse is an *Error with the C status and a message naming
// what is wrong; Close is explicit and idempotent; the Go-side struct layouts match the library's.

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func load(t *testing.T, numerics Numerics) *Model {
	t.Helper()
	options := DefaultLoadOptions()
	options.Numerics, options.Threads = numerics, 1
	model, err := Load(checkpointPath, &options)
	if err != nil {
		t.Fatalf("%s: load: %v", context(), err)
	}
	t.Cleanup(model.Close)
	return model
}

func newSession(t *testing.T, model *Model) *Session {
	t.Helper()
	session, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(session.Close)
	return session
}

func greedy(maxTokens int64) *GenerateOptions {
	options := DefaultGenerateOptions()
	options.Sampling, options.MaxTokens, options.StopAtEOS = GreedySampling(), maxTokens, false
	return &options
}

func vocab(t *testing.T, model *Model) int64 {
	config, err := model.Config()
	if err != nil {
		t.Fatal(err)
	}
	return config.VocabSize
}

func must[T any](t *testing.T) func(T, error) T {
	return func(value T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", context(), err)
		}
		return value
	}
}

func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", context(), err)
	}
}

// wantStatus fails unless err is an *Error of the status whose message contains every fragment.
func wantStatus(t *testing.T, err error, status Status, fragments ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: want a %s *Error, got %v", context(), status, err)
	}
	if e.Status != status {
		t.Fatalf("%s: want status %s, got %v", context(), status, err)
	}
	for _, fragment := range fragments {
		if !strings.Contains(e.Message, fragment) {
			t.Fatalf("%s: message %q lacks %q", context(), e.Message, fragment)
		}
	}
}

// ---- generation against the oracles ----

func TestGreedyGenerationEqualsTheNumpyReferenceInCleanNumerics(t *testing.T) {
	model := load(t, NumericsClean)
	r := newRng(1)
	prompt := r.prompt(vocab(t, model), 5+int(r.below(20)))
	generation := must[Generation](t)(newSession(t, model).Generate(prompt, greedy(10)))
	if want := referenceGreedy(t, prompt, 10, "clean"); !reflect.DeepEqual(generation.Tokens, want) {
		t.Fatalf("%s, prompt %v: got %v, the reference %v", context(), prompt, generation.Tokens, want)
	}
	if generation.StopReason != StopMaxTokens {
		t.Fatalf("stop reason %s", generation.StopReason)
	}
}

func TestGreedyGenerationEqualsFlashkvRunInFaithfulNumerics(t *testing.T) {
	model := load(t, NumericsFaithful)
	r := newRng(2)
	prompt := r.prompt(vocab(t, model), 5+int(r.below(20)))
	session := newSession(t, model)
	options := greedy(10)
	var streamed []int32
	options.OnToken = func(token int32) bool { streamed = append(streamed, token); return true }
	generation := must[Generation](t)(session.Generate(prompt, options))
	want := cliGreedy(t, prompt, 10)
	if !reflect.DeepEqual(generation.Tokens, want) || !reflect.DeepEqual(streamed, want) {
		t.Fatalf("%s, prompt %v: got %v (streamed %v), flashkv run %v", context(), prompt, generation.Tokens,
			streamed, want)
	}
	held := must[[]int32](t)(session.Tokens())
	if !reflect.DeepEqual(held, append(append([]int32{}, prompt...), want...)) {
		t.Fatalf("%s: the session holds %v", context(), held)
	}
}

func TestAStopTokenEndsGenerationAndIsKept(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(3).prompt(vocab(t, model), 9)
	free := must[Generation](t)(newSession(t, model).Generate(prompt, greedy(6)))
	stop := free.Tokens[3]
	first := 0
	for free.Tokens[first] != stop {
		first++
	}
	options := greedy(6)
	options.StopTokens = []int32{stop}
	stopped := must[Generation](t)(newSession(t, model).Generate(prompt, options))
	if !reflect.DeepEqual(stopped.Tokens, free.Tokens[:first+1]) || stopped.StopReason != StopToken {
		t.Fatalf("%s: %v (%s), free run %v", context(), stopped.Tokens, stopped.StopReason, free.Tokens)
	}
}

// ---- session laws through the wrapper ----

func TestARestoredSnapshotContinuesLikeTheOriginalSession(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(4).prompt(vocab(t, model), 11)
	original := newSession(t, model)
	noError(t, original.Append(prompt))
	snapshot := must[*KV](t)(original.KV())
	defer snapshot.Close()
	if got := must[[]int32](t)(snapshot.Tokens()); !reflect.DeepEqual(got, prompt) {
		t.Fatalf("snapshot tokens %v", got)
	}
	if must[int64](t)(snapshot.Bytes()) <= 0 {
		t.Fatal("an empty snapshot")
	}
	continued := must[Generation](t)(original.Generate(nil, greedy(5)))
	fork := must[*KV](t)(snapshot.Fork())
	defer fork.Close()
	restored := newSession(t, model)
	noError(t, restored.Restore(fork))
	if again := must[Generation](t)(restored.Generate(nil, greedy(5))); !reflect.DeepEqual(again, continued) {
		t.Fatalf("%s: restored %v, original %v", context(), again, continued)
	}
}

func TestBatchedDecodeEqualsAppendingOneByOne(t *testing.T) {
	model := load(t, NumericsClean)
	r := newRng(5)
	v := vocab(t, model)
	p, q, next := r.prompt(v, 7), r.prompt(v, 12), r.prompt(v, 2)
	a, b := newSession(t, model), newSession(t, model)
	noError(t, a.Append(p))
	noError(t, b.Append(q))
	noError(t, Decode([]*Session{a, b}, next))
	a1, b1 := newSession(t, model), newSession(t, model)
	noError(t, a1.Append(append(append([]int32{}, p...), next[0])))
	noError(t, b1.Append(append(append([]int32{}, q...), next[1])))
	for _, pair := range [][2]*Session{{a, a1}, {b, b1}} {
		x, y := must[[]float32](t)(pair[0].Logits()), must[[]float32](t)(pair[1].Logits())
		if int64(len(x)) != v {
			t.Fatalf("%d logits", len(x))
		}
		scale, worst := 0.0, 0.0
		for i := range y {
			scale = math.Max(scale, math.Abs(float64(y[i])))
			worst = math.Max(worst, math.Abs(float64(x[i]-y[i])))
		}
		if worst > 1e-5*scale {
			t.Fatalf("%s: batched logits differ by %g (scale %g)", context(), worst, scale)
		}
	}
}

func TestRewindReturnsToTheEarlierTimelineAndSamplingIsReproducible(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(6).prompt(vocab(t, model), 8)
	session := newSession(t, model)
	noError(t, session.Append(prompt))
	logits := must[[]float32](t)(session.Logits())
	params := DefaultSamplingParams()
	params.Temperature, params.TopK, params.Seed = 0.9, 50, seed
	drawn := must[int32](t)(session.Sample(&params))
	if again := must[int32](t)(session.Sample(&params)); again != drawn || drawn < 0 || int64(drawn) >= vocab(t, model) {
		t.Fatalf("%s: draws %d then %d", context(), drawn, again)
	}
	must[Generation](t)(session.Generate(nil, greedy(3)))
	if n := must[int64](t)(session.Len()); n != 11 {
		t.Fatalf("length %d", n)
	}
	noError(t, session.Rewind(3))
	if got := must[[]int32](t)(session.Tokens()); !reflect.DeepEqual(got, prompt) {
		t.Fatalf("tokens after rewind %v", got)
	}
	if got := must[[]float32](t)(session.Logits()); !reflect.DeepEqual(got, logits) {
		t.Fatalf("%s: logits after rewind differ", context())
	}
}

func TestAModelIsSharedBySessionsOnSeveralGoroutines(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(7).prompt(vocab(t, model), 6)
	want := must[Generation](t)(newSession(t, model).Generate(prompt, greedy(4))).Tokens
	results := make([][]int32, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			session, err := model.NewSession(nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer session.Close()
			generation, err := session.Generate(prompt, greedy(4))
			results[i], errs[i] = generation.Tokens, err
		}(i)
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || !reflect.DeepEqual(results[i], want) {
			t.Fatalf("%s: goroutine %d: %v %v, want %v", context(), i, results[i], errs[i], want)
		}
	}
}

// ---- ownership: explicit, idempotent Close; handles outlive each other as documented ----

func TestSessionsAndSnapshotsOutliveTheirModelAndEachOther(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(8).prompt(vocab(t, model), 6)
	want := must[Generation](t)(newSession(t, model).Generate(prompt, greedy(4))).Tokens
	session := must[*Session](t)(model.NewSession(nil))
	noError(t, session.Append(prompt))
	snapshot := must[*KV](t)(session.KV())
	model.Close()
	if got := must[Generation](t)(session.Generate(nil, greedy(4))).Tokens; !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: after the model's Close: %v, want %v", context(), got, want)
	}
	session.Close()
	fork := must[*KV](t)(snapshot.Fork())
	snapshot.Close()
	if got := must[[]int32](t)(fork.Tokens()); !reflect.DeepEqual(got, prompt) {
		t.Fatalf("fork tokens %v", got)
	}
	fork.Close()
}

func TestCloseIsIdempotentAndUseAfterCloseIsAnError(t *testing.T) {
	model := load(t, NumericsFaithful)
	session := must[*Session](t)(model.NewSession(nil))
	noError(t, session.Append([]int32{1, 2}))
	snapshot := must[*KV](t)(session.KV())
	session.Close()
	session.Close()
	snapshot.Close()
	snapshot.Close()
	model.Close()
	model.Close()
	var nilSession *Session
	nilSession.Close()
	_, err := session.Len()
	wantStatus(t, err, StatusInvalidArgument, "Session used after Close")
	_, err = snapshot.Tokens()
	wantStatus(t, err, StatusInvalidArgument, "KV used after Close")
	_, err = model.NewSession(nil)
	wantStatus(t, err, StatusInvalidArgument, "Model used after Close")
	wantStatus(t, Decode([]*Session{session}, []int32{1}), StatusInvalidArgument, "session 0")
}

// ---- errors: status + message, never a crash ----

func TestAMissingCheckpointIsNotFoundAndNamesThePath(t *testing.T) {
	_, err := Load(filepath.Join(checkpointPath, "no-such-dir"), nil)
	wantStatus(t, err, StatusNotFound, "no-such-dir")
	if !IsStatus(err, StatusNotFound) || !strings.HasPrefix(err.Error(), "flashkv not_found: ") {
		t.Fatalf("error text %q", err.Error())
	}
}

func TestABrokenConfigIsInvalidConfigAndNamesTheFile(t *testing.T) {
	directory := t.TempDir()
	noError(t, os.WriteFile(filepath.Join(directory, "config.json"), []byte(`{"vocab_size": `), 0o644))
	_, err := Load(directory, nil)
	wantStatus(t, err, StatusInvalidConfig, "config.json")
}

func TestBadLoadOptionsAreRefused(t *testing.T) {
	_, err := Load("bad\x00path", nil)
	wantStatus(t, err, StatusInvalidArgument, "NUL")
	options := DefaultLoadOptions()
	options.Device = DeviceCUDA
	_, err = Load(checkpointPath, &options)
	wantStatus(t, err, StatusUnsupported)
	options = DefaultLoadOptions()
	options.PrefillChunk = 0
	_, err = Load(checkpointPath, &options)
	wantStatus(t, err, StatusInvalidArgument, "prefill_chunk")
}

func TestATokenOutsideTheVocabularyIsRefusedAndLeavesTheSessionUnchanged(t *testing.T) {
	model := load(t, NumericsFaithful)
	session := newSession(t, model)
	noError(t, session.Append([]int32{3, 4}))
	bad := int32(vocab(t, model)) + int32(newRng(9).below(1000))
	wantStatus(t, session.Append([]int32{5, bad}), StatusInvalidArgument, strconv.Itoa(int(bad)))
	if got := must[[]int32](t)(session.Tokens()); !reflect.DeepEqual(got, []int32{3, 4}) {
		t.Fatalf("tokens after a refused append %v", got)
	}
	wantStatus(t, session.Append(nil), StatusInvalidArgument)
	wantStatus(t, session.Append([]int32{-1}), StatusInvalidArgument)
}

func TestMisuseOfASessionIsAnErrorNotACrash(t *testing.T) {
	model := load(t, NumericsFaithful)
	session := newSession(t, model)
	_, err := session.Logits()
	wantStatus(t, err, StatusInvalidArgument)
	_, err = session.Sample(nil)
	wantStatus(t, err, StatusInvalidArgument)
	noError(t, session.Append([]int32{7, 8, 9}))
	wantStatus(t, session.Rewind(4), StatusInvalidArgument)
	if n := must[int64](t)(session.Len()); n != 3 {
		t.Fatalf("a refused rewind changed the length to %d", n)
	}
	params := DefaultSamplingParams()
	params.TopP = 0
	_, err = session.Sample(&params)
	wantStatus(t, err, StatusInvalidArgument, "top_p")
	_, err = session.Generate(nil, greedy(-1))
	wantStatus(t, err, StatusInvalidArgument)
	options := greedy(2)
	options.StopTokens = []int32{int32(vocab(t, model))}
	_, err = session.Generate(nil, options)
	wantStatus(t, err, StatusInvalidArgument)
	other := newSession(t, model)
	wantStatus(t, Decode([]*Session{session, other}, []int32{1}), StatusInvalidArgument)
	wantStatus(t, Decode([]*Session{session, session}, []int32{1, 2}), StatusInvalidArgument)
	bad := int32(vocab(t, model))
	wantStatus(t, Decode([]*Session{session, other}, []int32{1, bad}), StatusInvalidArgument, strconv.Itoa(int(bad)))
	if n, m := must[int64](t)(session.Len()), must[int64](t)(other.Len()); n != 3 || m != 0 {
		t.Fatalf("a refused batch changed the sessions: %d, %d", n, m)
	}
}

func TestASnapshotOfAnotherLoadIsRefused(t *testing.T) {
	first, second := load(t, NumericsFaithful), load(t, NumericsFaithful)
	session := newSession(t, first)
	noError(t, session.Append([]int32{1, 2, 3}))
	snapshot := must[*KV](t)(session.KV())
	defer snapshot.Close()
	wantStatus(t, newSession(t, second).Restore(snapshot), StatusInvalidArgument)
}

func TestCallbacksCancelAndTheSessionKeepsWhatWasAppended(t *testing.T) {
	model := load(t, NumericsFaithful)
	prompt := newRng(10).prompt(vocab(t, model), 6)
	session := newSession(t, model)
	seen := 0
	options := greedy(8)
	options.OnToken = func(int32) bool { seen++; return seen < 3 }
	_, err := session.Generate(prompt, options)
	wantStatus(t, err, StatusCancelled)
	if n := must[int64](t)(session.Len()); n != int64(len(prompt))+2 {
		t.Fatalf("length %d after cancelling at the third token", n)
	}

	chunked := must[*Session](t)(model.NewSession(&SessionOptions{Prefill: PrefillExact, PrefillChunk: 2}))
	defer chunked.Close()
	var progress [][2]int64
	noError(t, chunked.AppendWithProgress(prompt, func(done, total int64) bool {
		progress = append(progress, [2]int64{done, total})
		return true
	}))
	if !reflect.DeepEqual(progress, [][2]int64{{2, 6}, {4, 6}, {6, 6}}) {
		t.Fatalf("progress %v", progress)
	}
	fresh := must[*Session](t)(model.NewSession(&SessionOptions{Prefill: PrefillModel, PrefillChunk: 2}))
	defer fresh.Close()
	wantStatus(t, fresh.AppendWithProgress(prompt, func(done, _ int64) bool { return done < 4 }), StatusCancelled)
	if n := must[int64](t)(fresh.Len()); n != 4 {
		t.Fatalf("length %d: the chunks done are kept", n)
	}

	generating := must[*Session](t)(model.NewSession(&SessionOptions{Prefill: PrefillModel, PrefillChunk: 4}))
	defer generating.Close()
	options = greedy(2)
	progress = nil
	options.OnProgress = func(done, total int64) bool { progress = append(progress, [2]int64{done, total}); return true }
	must[Generation](t)(generating.Generate(prompt, options))
	if !reflect.DeepEqual(progress, [][2]int64{{4, 6}, {6, 6}}) {
		t.Fatalf("generate's prefill progress %v", progress)
	}
}

func TestAPanickingCallbackCancelsTheCallAndThePanicResumesAfterIt(t *testing.T) {
	model := load(t, NumericsFaithful)
	session := newSession(t, model)
	recovered := func() (payload interface{}) {
		defer func() { payload = recover() }()
		options := greedy(4)
		options.OnToken = func(int32) bool { panic("from the callback") }
		_, _ = session.Generate([]int32{4, 5, 6}, options)
		return nil
	}()
	if recovered != "from the callback" {
		t.Fatalf("recovered %v", recovered)
	}
	if n := must[int64](t)(session.Len()); n != 3 {
		t.Fatalf("length %d", n)
	}
	if g := must[Generation](t)(session.Generate(nil, greedy(2))); len(g.Tokens) != 2 {
		t.Fatalf("generation after the panic: %v", g)
	}
}

func TestALogCallbackCanCancelALoad(t *testing.T) {
	var lines []string
	options := DefaultLoadOptions()
	options.Log = func(_ LogLevel, message string) bool { lines = append(lines, message); return false }
	_, err := Load(checkpointPath, &options)
	wantStatus(t, err, StatusCancelled)
	if len(lines) != 1 || !strings.Contains(lines[0], checkpointPath) {
		t.Fatalf("log lines %q", lines)
	}
	options.Log = func(LogLevel, string) bool { return true }
	must[*Model](t)(Load(checkpointPath, &options)).Close()
}

// ---- the Go-side C structs against the library ----

func TestStructLayoutsMatchTheLibrary(t *testing.T) {
	sizes := structSizes()
	for name, pair := range sizes {
		if pair[0] != pair[1] {
			t.Errorf("%s: the library's init writes struct_size %d, cgo's layout is %d bytes", name, pair[0], pair[1])
		}
	}
	model := load(t, NumericsFaithful)
	config := must[Config](t)(model.Config())
	if config.VocabSize != 512 || config.NumHiddenLayers != 8 || config.EOSTokenID != 1 {
		t.Fatalf("config %+v", config)
	}
	if memory := must[Memory](t)(model.Memory()); memory.WeightStorage != "fp32, dequantized at load" {
		t.Fatalf("memory %+v", memory)
	}
	if options := must[LoadOptions](t)(model.LoadOptions()); options.Threads != 1 {
		t.Fatalf("load options %+v", options)
	}
	if must[uint64](t)(model.GlobalKVBytes(1000)) <= must[uint64](t)(model.GlobalKVBytes(10)) {
		t.Fatal("global KV bytes do not grow")
	}
}

func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	want := LoadOptions{Device: DeviceCPU, Threads: 0, Numerics: NumericsFaithful, Prefill: PrefillExact, PrefillChunk: 512}
	if got := DefaultLoadOptions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("load options %+v", got)
	}
	if got := DefaultSessionOptions(); got != (SessionOptions{Prefill: PrefillModel, PrefillChunk: 0}) {
		t.Fatalf("session options %+v", got)
	}
	wantSampling := SamplingParams{Temperature: 1, TopK: 0, TopP: 1, MinP: 0, RepetitionPenalty: 1}
	if got := DefaultSamplingParams(); got != wantSampling {
		t.Fatalf("sampling %+v", got)
	}
	if got := DefaultGenerateOptions(); got.MaxTokens != 256 || !got.StopAtEOS || len(got.StopTokens) != 0 {
		t.Fatalf("generate options %+v", got)
	}
}

func TestStatusCodesAndNamesAreTheHeaders(t *testing.T) {
	names := []string{"ok", "invalid_argument", "invalid_config", "invalid_checkpoint", "not_found", "io",
		"unsupported", "device", "out_of_memory", "cancelled", "internal"}
	for code, name := range names {
		if got := Status(code).String(); got != name {
			t.Errorf("status %d: %q, want %q", code, got, name)
		}
	}
	if Status(77).String() != "unknown" || StatusCancelled != 9 || StatusInternal != 10 {
		t.Fatal("status values")
	}
	if LibraryABIVersion() != ABIVersion || ABIVersion != 1<<16|1 || Version() == "" {
		t.Fatalf("ABI %#x, library %#x, version %q", ABIVersion, LibraryABIVersion(), Version())
	}
}

func TestTheReadmeExampleIsInTheDocsVerbatim(t *testing.T) {
	example := must[[]byte](t)(os.ReadFile(filepath.Join(repository, "examples/go/cmd/readme/main.go")))
	docs := must[[]byte](t)(os.ReadFile(filepath.Join(repository, "docs/embedding-rust-go.md")))
	if !strings.Contains(string(docs), "```go\n"+string(example)+"```\n") {
		t.Fatal("docs/embedding-rust-go.md lost examples/go/cmd/readme/main.go")
	}
}
