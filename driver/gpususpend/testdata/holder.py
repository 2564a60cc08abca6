"""Holds GIB gibibytes of known data on the GPU for the suspend-in-place test.

Fills GIB chunks of 1 GiB each with int64 counters (chunk i holds
i*2^27 .. (i+1)*2^27-1, so a page restored to the wrong place shows), prints
"ready", then answers commands on stdin, one per line:

  verify  compare every chunk with what it should hold, on the GPU;
          print "intact <seconds>" or "corrupt chunk <i>"
  exit    exit 0
"""
import os
import sys
import time

import torch

ELEMS = 1 << 27  # int64 elements in 1 GiB


def expected(i, device):
    return torch.arange(i * ELEMS, (i + 1) * ELEMS, dtype=torch.int64, device=device)


def main():
    gib = int(sys.argv[1])
    dev = torch.device("cuda")
    chunks = [expected(i, dev) for i in range(gib)]
    torch.cuda.synchronize()
    print(f"ready pid {os.getpid()} chunks {len(chunks)} allocated {torch.cuda.memory_allocated()}", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "verify":
            start = time.monotonic()
            for i, c in enumerate(chunks):
                if not torch.equal(c, expected(i, dev)):
                    print(f"corrupt chunk {i}", flush=True)
                    break
            else:
                torch.cuda.synchronize()
                print(f"intact {time.monotonic() - start:.3f}", flush=True)
        elif cmd == "exit":
            return 0
        else:
            print(f"unknown command {cmd!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
