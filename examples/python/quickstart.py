# flashkv in 15 lines (README): python3 examples/python/quickstart.py CHECKPOINT_DIR
import sys

import flashkv

model = flashkv.Model(sys.argv[1])                 # options: device, threads, numerics, prefill
session = model.session()
prompt = [5, 17, 300, 42, 7]

for token in session.generate(prompt, max_tokens=8, temperature=0):
    print(token, end=" ", flush=True)              # streamed, greedy; the session holds each token
print()

snapshot = session.kv()                            # immutable; session.restore(snapshot) returns to it
print(f"{len(snapshot.tokens)} tokens, {snapshot.bytes} B of KV state, logits {session.logits().shape}")
