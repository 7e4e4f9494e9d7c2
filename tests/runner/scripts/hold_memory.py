"""Holds --mib MiB of host memory (touched, so it is resident), writes `holding`, then sleeps."""

import argparse
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--mib", type=int, default=300)
args, _ = parser.parse_known_args()
block = bytearray(args.mib * 1024 * 1024)
for offset in range(0, len(block), 4096):
    block[offset] = 1
Path("holding").write_text(str(len(block)))
print(f"holding {args.mib} MiB", flush=True)
time.sleep(120)
