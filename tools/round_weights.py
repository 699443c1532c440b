"""Round a checkpoint's float32 weights to bfloat16, to ship a model in half the bytes.

The rounded file names other weights (its own checksum), so it is tested as itself before
a model is made of it::

    python tools/round_weights.py RUN/checkpoints/latest.safetensors rounded.safetensors
    sgps test RUN --problems official.txt --budget 4000 --rounds 2 --checkpoint rounded.safetensors
    python tools/make_model.py RUN NAME --weights rounded.safetensors ...

Networks load it widened back to float32 (`sgps.models.checkpoint.round_checkpoint`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sgps.errors import SgpsError
from sgps.models.checkpoint import STORED_PRECISIONS, round_checkpoint


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a checkpoint with float32 weights")
    parser.add_argument("target", type=Path, help="where the rounded checkpoint goes (replaced if there)")
    parser.add_argument("--precision", choices=sorted(STORED_PRECISIONS), default="bfloat16")
    args = parser.parse_args()
    try:
        digest = round_checkpoint(args.source, args.target, args.precision)
    except SgpsError as error:
        print(f"round_weights: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.target}: {args.target.stat().st_size:,} bytes ({args.source.stat().st_size:,} before), "
          f"weights {digest}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
