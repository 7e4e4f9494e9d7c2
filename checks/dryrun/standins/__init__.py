"""The stand-ins a dry run trains with: an OpenAI-compatible policy on loopback (its replies and,
for games, its move search) and `art.Backend`s that train nothing but check what they are handed,
laying out checkpoints as LocalBackend does."""
