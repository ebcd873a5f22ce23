"""The thread workers behind the main screen (loading a family, building a self-draft, decoding
a run) and the messages they post."""
