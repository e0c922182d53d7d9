"""flashkv from Python in one page: load a checkpoint, stream greedy tokens, snapshot the KV state and continue
two forks from it with different seeds, advance both forks in one batched decode step, and rewind.

    python3 examples/python/generate.py CHECKPOINT_DIR [TOKEN_ID ...]

Make a checkpoint with: tools/make-tiny-checkpoint --config tiny-v41 --seed 1 --out /tmp/tiny
"""

import sys

import flashkv


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(f"usage: {argv[0]} CHECKPOINT_DIR [TOKEN_ID ...]", file=sys.stderr)
        return 2
    prompt = [int(arg) for arg in argv[2:]] or [5, 17, 300, 42, 7]
    try:
        model = flashkv.Model(argv[1], numerics="faithful")  # the checkpoint's storage formats and cast points
        memory = model.memory()
        print(f"model: {model.config.num_hidden_layers} layers, vocab {model.vocab_size}; "
              f"weights {memory.resident_weight_bytes} B ({memory.weight_storage}); "
              f"KV {memory.report.global_kv_bytes_per_token:.1f} B/token "
              f"+ {memory.report.window_bytes_per_session} B window/session")

        # Greedy generation, streamed: each token is appended before the loop body sees it.
        session = model.session()
        print("greedy:", end="")
        for token in session.generate(prompt, max_tokens=8, temperature=0):
            print(f" {token}", end="", flush=True)
        print(f"  (session holds {len(session)} tokens in {session.kv_bytes} B)")

        # Snapshot, then two sessions continue from it with different seeds.
        snapshot = session.kv()
        a, b = model.session(), model.session()
        a.restore(snapshot)
        b.restore(snapshot.fork())
        next_a = a.sample(temperature=0.8, top_p=0.95, seed=1)
        next_b = b.sample(temperature=0.8, top_p=0.95, seed=2)

        # One batched forward appends one token to each session.
        flashkv.decode([a, b], [next_a, next_b])
        print(f"forks: a +{next_a}, b +{next_b}; both at {len(a)} tokens")

        # Rewinding the fork's step gives back the snapshot's timeline.
        a.rewind(1)
        print(f"a after rewind(1): {len(a)} tokens, same as the snapshot: {a.tokens == snapshot.tokens}")
        return 0
    except flashkv.Error as error:
        print(f"error ({error.code}): {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
