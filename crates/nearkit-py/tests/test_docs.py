"""The examples in the docstrings run and show what they say."""

import doctest

import pytest

import nearkit
from nearkit import _collide, _io, _mesh, _points, _sharded


@pytest.mark.parametrize("module", [nearkit, _points, _mesh, _collide, _io, _sharded], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    failed, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0


def test_dask_docstring_examples():
    pytest.importorskip("dask")
    import nearkit.dask

    failed, attempted = doctest.testmod(nearkit.dask, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0 and attempted > 0


def test_help_teaches():
    doc = nearkit.PointIndex.query.__doc__
    for word in ["distance_upper_bound", "workers", "Examples", "inf", "1-based"]:
        assert word in doc
