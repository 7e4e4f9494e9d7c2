"""The command line (`artbot` and its subcommands) and the terminal chat: the top layer, which
may use every other part."""
