"""Where torch lives: the backend protocol and its implementations (transformers, the fast
Llama backend with its static step, float16 and int4 variants), the KV-cache runner, host
transfers, sampling and token trees."""
