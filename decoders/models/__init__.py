"""Model families: what a family is, where its weights come from (a hub id, a folder, a GGUF,
the bundled model), the converted-GGUF cache, and memory checks. torch only inside functions."""
