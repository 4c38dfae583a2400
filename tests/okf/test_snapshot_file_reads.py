"""A captured file is read whole whatever its size did since its stat."""

from __future__ import annotations

import os

import pytest

from knowspec.impl.okf.bundle import snapshot


@pytest.mark.parametrize("stat_size,final_size", [(0, 0), (10, 10), (10, 5000), (5000, 10), (3, 3 << 20)])
def test_a_file_is_read_whole_however_it_changed_since_its_stat(tmp_path, stat_size, final_size):
    path = tmp_path / "c.md"
    path.write_bytes(b"x" * stat_size)
    st = os.stat(path)
    path.write_bytes(bytes(range(256)) * (final_size // 256) + b"y" * (final_size % 256))
    dir_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert snapshot._read_file(dir_fd, "c.md", st) == path.read_bytes()
    finally:
        os.close(dir_fd)
