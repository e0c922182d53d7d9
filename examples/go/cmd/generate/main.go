// flashkv from Go in one page: load a checkpoint, stream greedy tokens, snapshot the KV state, continue two
// sessions from the snapshot with different seeds, advance both in one batched decode step, rewind.
//
//	go run ./cmd/generate CHECKPOINT_DIR [TOKEN_ID ...]
//
// Make a checkpoint with: tools/make-tiny-checkpoint --config tiny-v41 --seed 1 --out /tmp/tiny
package main

import (
	"fmt"
	"os"
	"reflect"
	"strconv"

	"flashkv"
)

func run(checkpoint string, prompt []int32) error {
	model, err := flashkv.Load(checkpoint, nil)
	if err != nil {
		return err
	}
	defer model.Close()
	config, err := model.Config()
	if err != nil {
		return err
	}
	memory, err := model.Memory()
	if err != nil {
		return err
	}
	fmt.Printf("model: %d layers, vocab %d; weights %d B (%s); KV %.1f B/token + %d B window/session\n",
		config.NumHiddenLayers, config.VocabSize, memory.ResidentWeightBytes, memory.WeightStorage,
		memory.GlobalKVBytesPerToken, memory.WindowBytesPerSession)

	// Greedy generation, streamed; returning false from OnToken would cancel (StatusCancelled).
	session, err := model.NewSession(nil)
	if err != nil {
		return err
	}
	defer session.Close()
	options := flashkv.DefaultGenerateOptions()
	options.Sampling = flashkv.GreedySampling()
	options.MaxTokens = 8
	options.OnToken = func(token int32) bool {
		fmt.Printf(" %d", token)
		return true
	}
	fmt.Print("greedy:")
	generation, err := session.Generate(prompt, &options)
	if err != nil {
		return err
	}
	length, _ := session.Len()
	kvBytes, _ := session.KVBytes()
	fmt.Printf("  (%d tokens, %s; session holds %d tokens in %d B)\n", len(generation.Tokens),
		generation.StopReason, length, kvBytes)

	// Snapshot, then two sessions continue from it with different seeds.
	snapshot, err := session.KV()
	if err != nil {
		return err
	}
	defer snapshot.Close()
	fork, err := snapshot.Fork()
	if err != nil {
		return err
	}
	defer fork.Close()
	a, err := model.NewSession(nil)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := model.NewSession(nil)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := a.Restore(snapshot); err != nil {
		return err
	}
	if err := b.Restore(fork); err != nil {
		return err
	}
	sampling := flashkv.DefaultSamplingParams()
	sampling.Temperature, sampling.TopP, sampling.Seed = 0.8, 0.95, 1
	nextA, err := a.Sample(&sampling)
	if err != nil {
		return err
	}
	sampling.Seed = 2
	nextB, err := b.Sample(&sampling)
	if err != nil {
		return err
	}

	// One batched forward appends one token to each session.
	if err := flashkv.Decode([]*flashkv.Session{a, b}, []int32{nextA, nextB}); err != nil {
		return err
	}
	length, _ = a.Len()
	fmt.Printf("forks: a +%d, b +%d; both at %d tokens\n", nextA, nextB, length)

	if err := a.Rewind(1); err != nil {
		return err
	}
	tokensA, _ := a.Tokens()
	tokensSnapshot, _ := snapshot.Tokens()
	fmt.Printf("a after rewind(1) equals the snapshot: %v\n", reflect.DeepEqual(tokensA, tokensSnapshot))
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s CHECKPOINT_DIR [TOKEN_ID ...]\n", os.Args[0])
		os.Exit(2)
	}
	prompt := []int32{}
	for _, arg := range os.Args[2:] {
		token, err := strconv.ParseInt(arg, 10, 32)
		if err != nil {
			fmt.Fprintf(os.Stderr, "not a token id: %s\n", arg)
			os.Exit(2)
		}
		prompt = append(prompt, int32(token))
	}
	if len(prompt) == 0 {
		prompt = []int32{5, 17, 300, 42, 7}
	}
	if err := run(os.Args[1], prompt); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
