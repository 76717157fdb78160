"""Writes a file whole or not at all, by the protocol Tally's own writer (crates/tally-output)
follows: a temporary created exclusively under a unique name in the target's directory, synced,
then renamed over the target; on any failure the temporary is removed and the target is left as
it was. For the scripts, which cannot call the Rust crate."""

import os
import tempfile


def write_whole(path, text):
    """Writes `text` (str) to `path`, replacing it whole. Raises OSError on failure, after
    removing the temporary."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private to its owner; the output is readable as new files are.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
