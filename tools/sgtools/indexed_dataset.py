"""Writing Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx, "MMIDIDX" version 1).

The layout is the one megatron/core/datasets/indexed_dataset.py reads and stepgraph's
src/data/indexed_dataset.cpp checks (docs/data-and-checkpoints.md), little-endian:

  .idx  9 bytes "MMIDIDX\\0\\0", uint64 version 1, uint8 dtype code, uint64 sequence count S,
        uint64 document-index count D, int32[S] sequence lengths, int64[S] byte offsets into .bin,
        int64[D] document index (0 first, then the sequence count after each document; S last)
  .bin  the tokens of all sequences back to back, in the dtype of the code

Offsets are the running sum of length * itemsize from 0, so the sequences tile the .bin exactly (no
gaps, no overlap, the last one ends at the file's end). Both files are written under *.tmp names, fsynced and
renamed into place by finalize(), so a reader never sees a half-written dataset; an existing .idx is removed
before the renames, so a crash between them never leaves a new .bin beside an old .idx.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from . import ToolError

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7,
               np.dtype(np.uint16): 8}


def token_dtype_for_vocab(vocab_size: int) -> np.dtype:
    """Megatron's DType.optimal_dtype: uint16 below a vocabulary of 65500 tokens, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def output_prefix(prefix: str, key: str) -> str:
    """Megatron's output name for one JSON key at document level: PREFIX_<key>_document."""
    return f"{prefix}_{key}_document"


def _sync_folder(folder: str) -> None:
    """Makes the folder's entries (a removal, a rename) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IndexedDatasetWriter:
    """Appends documents (each one or more sequences of token ids) and writes the .idx at finalize()."""

    def __init__(self, prefix: str, dtype: np.dtype):
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        if self.dtype not in DTYPE_CODES or self.dtype.kind == "f":
            raise ValueError(f"token dtype {self.dtype} is not an integer dtype Megatron knows")
        self.bin_path = prefix + ".bin"
        self.idx_path = prefix + ".idx"
        self._bin_tmp = self.bin_path + ".tmp"
        self._idx_tmp = self.idx_path + ".tmp"
        self.sequence_lengths: list[int] = []
        self.document_index: list[int] = [0]
        self.num_tokens = 0
        parent = os.path.dirname(prefix)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._bin = open(self._bin_tmp, "wb")
        except OSError as e:
            raise ToolError(f"cannot write the output {self.bin_path}: {e.strerror} "
                            f"(choose a writable --output-prefix)") from None

    def add_documents(self, tokens: np.ndarray, document_lengths: list[list[int]]) -> None:
        """Several documents at once: tokens back to back, document_lengths[i] = document i's sequence lengths."""
        total = sum(sum(lengths) for lengths in document_lengths)
        if total != tokens.size:
            raise ValueError(f"sequence lengths sum to {total}, but {tokens.size} tokens were given")
        self._write(tokens)
        for lengths in document_lengths:
            self.sequence_lengths.extend(lengths)
            self.document_index.append(len(self.sequence_lengths))

    def _write(self, tokens: np.ndarray) -> None:
        if tokens.size and (int(tokens.min()) < np.iinfo(self.dtype).min or
                            int(tokens.max()) > np.iinfo(self.dtype).max):
            raise ToolError(f"{self.prefix}: token ids {int(tokens.min())}..{int(tokens.max())} do not fit "
                            f"the dataset dtype {self.dtype}")
        try:
            self._bin.write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        except OSError as e:
            raise ToolError(f"cannot write {self._bin_tmp}: {e.strerror}") from None
        self.num_tokens += int(tokens.size)

    def index_bytes(self) -> bytes:
        lengths = np.asarray(self.sequence_lengths, dtype=np.int64)
        if lengths.size and lengths.max() > np.iinfo(np.int32).max:
            raise ToolError(f"{self.prefix}: a sequence of {int(lengths.max())} tokens does not fit the "
                            f".idx's int32 lengths")
        offsets = np.zeros(lengths.size, dtype=np.int64)
        if lengths.size > 1:
            np.cumsum(lengths[:-1] * self.dtype.itemsize, out=offsets[1:])
        header = (INDEX_MAGIC + struct.pack("<Q", INDEX_VERSION) + struct.pack("<B", DTYPE_CODES[self.dtype]) +
                  struct.pack("<Q", lengths.size) + struct.pack("<Q", len(self.document_index)))
        return b"".join([header, lengths.astype("<i4").tobytes(), offsets.astype("<i8").tobytes(),
                         np.asarray(self.document_index, dtype="<i8").tobytes()])

    def finalize(self) -> None:
        """Writes the .idx and renames both files into place (the order: _replace_pair)."""
        try:
            self._bin.flush()
            os.fsync(self._bin.fileno())
            self._bin.close()
            with open(self._idx_tmp, "wb") as f:
                f.write(self.index_bytes())
                f.flush()
                os.fsync(f.fileno())
            self._replace_pair()
        except OSError as e:
            self.abort()
            raise ToolError(f"cannot write the output {self.prefix}.{{bin,idx}}: {e.strerror}") from None
        except BaseException:
            self.abort()  # a Ctrl-C or a bug: its own message, and no temporary files left behind either
            raise

    def _replace_pair(self) -> None:
        """The old .idx goes first, then the .bin and last the .idx are renamed into place.

        Two renames are not one atomic step, and an .idx ties itself to its .bin only by its sequence lengths:
        the C++ reader accepts an .idx whose sequences tile the .bin exactly, so an old .idx beside a new .bin
        of the same size (the same text under another tokenizer with the same dtype) would read as valid, with
        wrong boundaries. With the old .idx removed first (durably), a crash between the renames leaves a .bin
        without an .idx (reported as missing, with PREFIX.idx.tmp named), never a pair of two datasets. As
        src/data/indexed_dataset.cpp (IndexedDatasetWriter::replace_pair) does."""
        folder = os.path.dirname(self.prefix) or "."
        try:
            os.remove(self.idx_path)
            _sync_folder(folder)
        except FileNotFoundError:
            pass
        os.replace(self._bin_tmp, self.bin_path)
        os.replace(self._idx_tmp, self.idx_path)
        _sync_folder(folder)

    def abort(self) -> None:
        """Removes the temporary files (after an error); finished outputs are left alone."""
        self._bin.close()
        for path in (self._bin_tmp, self._idx_tmp):
            try:
                os.remove(path)
            except OSError:
                pass
