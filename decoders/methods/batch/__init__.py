"""Batched decoding: B prompts decoded together on one model (`decoders.backends.batched` on torch,
`decoders.backends.llamacpp_batched` on llama.cpp), each sequence at its own length, accepting its
own prefix of its own draft in the same verify forward, finished ones leaving the batch
(`chain.decode_batch`). Not registered methods: the batch bench (`decoders.bench.batch`) runs them
beside autoregressive decoding at the same batch size."""
