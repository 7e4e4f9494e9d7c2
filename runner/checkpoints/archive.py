"""A checkpoint's folder as a gzipped tar, streamed as it is made: the regular files below it at
the archive's root (`adapter_config.json`, `adapter_model.safetensors`), read as
runner.checkpoints.job_files reads a job's files (no symlink followed, nothing but regular files).

Written block by block (a tar header, the content, zeros to the next 512 bytes) through one zlib
stream, so that an adapter of any size is never held in memory.
"""

from __future__ import annotations

import tarfile
import zlib
from collections.abc import Iterator

from runner.checkpoints.job_files import JobPath, opened_folder, regular_files

BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
GZIP_WBITS = 31  # zlib's gzip container
FILE_MODE = 0o644


def tar_gz(folder: JobPath) -> Iterator[bytes]:
    """The folder's regular files as a .tar.gz, in pieces. OSError (at the first piece) when the
    folder cannot be opened safely."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
    written = 0

    def packed(data: bytes) -> bytes:
        nonlocal written
        written += len(data)
        return compressor.compress(data)

    with opened_folder(folder) as fd:
        for opened in regular_files(fd):
            info = tarfile.TarInfo(opened.name)
            info.size, info.mode, info.mtime = opened.size, FILE_MODE, int(opened.mtime)
            yield packed(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
            sent = 0
            for chunk in opened.chunks():
                sent += len(chunk)
                yield packed(chunk)
            # A file that shrank since it was opened still fills the size its header gave.
            yield packed(b"\0" * (opened.size - sent + (-opened.size % BLOCK)))
    yield packed(b"\0" * (2 * BLOCK))  # the end of the archive
    yield packed(b"\0" * (-written % RECORD))
    yield compressor.flush()
