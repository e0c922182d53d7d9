// Greedy generation from a checkpoint: go run ./cmd/readme CHECKPOINT_DIR
package main

import (
	"fmt"
	"log"
	"os"

	"flashkv"
)

func main() {
	model, err := flashkv.Load(os.Args[1], nil)
	if err != nil {
		log.Fatal(err) // a *flashkv.Error: Status and Message
	}
	defer model.Close()
	session, err := model.NewSession(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	options := flashkv.DefaultGenerateOptions()
	options.Sampling, options.MaxTokens = flashkv.GreedySampling(), 8
	options.OnToken = func(token int32) bool { fmt.Println("token", token); return true } // false cancels
	generation, err := session.Generate([]int32{5, 17, 300, 42, 7}, &options)
	fmt.Println(len(generation.Tokens), "tokens, stopped by", generation.StopReason, err)
}
