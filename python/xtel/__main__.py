"""``python -m xtel --version``: the version of xtel's C++ core, as its programs print it."""

import sys

from . import __version__

USAGE = "usage: python -m xtel --version\n"


def main(argv: "list[str]") -> int:
    """Prints the version for --version, the usage for --help; refuses anything else (64)."""
    if argv == ["--version"]:
        sys.stdout.write(f"xtel {__version__}\n")
        return 0
    if argv in (["--help"], ["-h"]):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(f"python -m xtel: expected --version or --help, got {' '.join(argv) or 'nothing'}\n")
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
