"""ray_batch.py - run many `ray` CLI commands in one Python process.

Each `ray` command a test runs costs a second or two of Python start-up and
imports (Ray's are heavy) before it sends its one HTTP request; a test
asking for forty listings spends most of its time there.  This runs the
same click commands (ray.scripts.scripts.cli, what the `ray` entry point
calls) one after the other in one process, so the requests and what the
CLI makes of the answers are Ray's own, paid for once.

  usage: python ray_batch.py OUTDIR < COMMANDS
  COMMANDS: one per line, `NAME ARGS...` split as a shell would (shlex);
  the command's output goes to OUTDIR/NAME, its stderr to OUTDIR/NAME.err.
  A NAME starting with `!` (left out of the file's name) is a command that
  must fail.  Stops at the first command that exits otherwise than it
  should: prints its name, arguments and output, and exits 1.
"""
import os
import shlex
import sys

from click.testing import CliRunner
from ray.scripts.scripts import cli


def main():
    out = sys.argv[1]
    runner = CliRunner()
    for line in sys.stdin:
        words = shlex.split(line)
        if not words:
            continue
        name, args = words[0], words[1:]
        must_fail = name.startswith("!")
        name = name.lstrip("!")
        r = runner.invoke(cli, args, prog_name="ray", catch_exceptions=True)
        with open(os.path.join(out, name), "w") as f:
            f.write(r.stdout)
        with open(os.path.join(out, name + ".err"), "w") as f:
            f.write(r.stderr)
        if (r.exit_code != 0) != must_fail:
            print("ray_batch: `ray %s` exited %s%s" % (" ".join(args), r.exit_code,
                                                        " (it should have failed)" if must_fail else ""))
            print(r.stdout + r.stderr)
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                print("exception: %r" % (r.exception,))
            sys.exit(1)


if __name__ == "__main__":
    main()
