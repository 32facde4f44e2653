"""Shared by the compatibility suite (issue #29): each test builds the env with a library's own
wrapper, runs that library's checker and trains a few hundred steps, masks honoured."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The machine is shared: tiny networks need one thread, not every core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
