"""Prints a lot, fast: --bytes of output in lines of ~100 bytes, then exits 0."""

import argparse
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--bytes", type=int, default=200_000_000)
args = parser.parse_args()

line = b"x" * 99 + b"\n"
block = line * 655  # about 64 KiB
written = 0
out = sys.stdout.buffer
out.write(b"FIRST LINE\n")
while written < args.bytes:
    out.write(block)
    written += len(block)
out.write(b"LAST LINE\n")
out.flush()
