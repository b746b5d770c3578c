"""pytest setup for the Python shim tests: import sgrt from python/ of this
repository. The library comes from $SGRT_LIBRARY (CTest sets it to the build's
libsgrt.so) or the shim's own search (build/src/libsgrt.so)."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))


@pytest.fixture
def repo():
    return REPO


@pytest.fixture
def data_dir():
    return os.path.join(REPO, "tests", "data")
