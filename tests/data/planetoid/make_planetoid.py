#!/usr/bin/env python3
"""Writes tiny Planetoid-format files (ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}) for
tests/test_gnn_data.cpp, pickled by Python's own pickler exactly as NumPy and SciPy objects
pickle (their __reduce__ layouts), without needing NumPy or SciPy installed: stand-in classes
are registered under numpy's and scipy's module names.

  python3 make_planetoid.py OUT_DIR      (writes cora with protocol 2, citeseer with protocol 0)
"""
import collections
import os
import struct
import sys
import types


def _module(name):
    m = types.ModuleType(name)
    sys.modules[name] = m
    return m


np = _module("numpy")
np_core = _module("numpy.core")
np_ma = _module("numpy.core.multiarray")
sp = _module("scipy")
sp_sparse = _module("scipy.sparse")
sp_csr = _module("scipy.sparse.csr")


def _reconstruct(*args):  # never called: only its name is pickled
    raise RuntimeError


_reconstruct.__module__ = "numpy.core.multiarray"
_reconstruct.__qualname__ = "_reconstruct"
np_ma._reconstruct = _reconstruct


class ndarray:
    pass


class dtype:
    def __init__(self, code, order):
        self.code, self.order = code, order

    def __reduce__(self):
        return (dtype, (self.code, False, True), (3, self.order, None, None, None, -1, -1, 0))


ndarray.__module__ = dtype.__module__ = "numpy"
np.ndarray, np.dtype = ndarray, dtype


class Array:
    """What numpy.ndarray.__reduce__ gives: (_reconstruct, (ndarray, (0,), b'b'), state)."""

    def __init__(self, values, shape, code):
        fmt = {"f8": "d", "f4": "f", "i4": "i", "i8": "q"}[code]
        self.shape, self.code = shape, code
        self.data = struct.pack("<%d%s" % (len(values), fmt), *values)

    def __reduce__(self):
        return (_reconstruct, (ndarray, (0,), b"b"),
                (1, self.shape, dtype(self.code, "<"), False, self.data))


class csr_matrix:
    def __init__(self, dense):
        rows, cols = len(dense), len(dense[0])
        data, indices, indptr = [], [], [0]
        for r in dense:
            for c, v in enumerate(r):
                if v != 0:
                    data.append(float(v))
                    indices.append(c)
            indptr.append(len(data))
        self._shape = (rows, cols)
        self.maxprint = 50
        self.format = "csr"
        self.data = Array(data, (len(data),), "f4")
        self.indices = Array(indices, (len(indices),), "i4")
        self.indptr = Array(indptr, (len(indptr),), "i4")


csr_matrix.__module__ = "scipy.sparse.csr"
sp_csr.csr_matrix = csr_matrix


def one_hot(labels, classes):
    flat = []
    for l in labels:
        flat += [1 if k == l else 0 for k in range(classes)]
    return Array(flat, (len(labels), classes), "i8")


def features(nodes, f):
    return [[((i * 7 + k * 3) % 5 == 0) * (1 + (i + k) % 3) for k in range(f)] for i in nodes]


def write(out, name, protocol, test_index, n_all, n_train, f=4, classes=3):
    # Node i has label i % classes and features features([i]); allx holds nodes 0..n_all-1,
    # x its first n_train rows, tx the test nodes in test.index order.
    os.makedirs(out, exist_ok=True)
    objs = {
        "x": csr_matrix(features(range(n_train), f)),
        "allx": csr_matrix(features(range(n_all), f)),
        "tx": csr_matrix(features(test_index, f)),
        "y": one_hot([i % classes for i in range(n_train)], classes),
        "ally": one_hot([i % classes for i in range(n_all)], classes),
        "ty": one_hot([i % classes for i in test_index], classes),
    }
    g = collections.defaultdict(list)
    nodes = list(range(n_all)) + sorted(test_index)
    for a, b in zip(nodes, nodes[1:]):
        g[a].append(b)  # a path over the nodes that exist, one direction only
    g[nodes[0]].append(nodes[0])  # a self-loop
    g[nodes[0]].append(nodes[1])  # a duplicate
    objs["graph"] = g
    for part, obj in objs.items():
        with open(os.path.join(out, "ind.%s.%s" % (name, part)), "wb") as fh:
            import pickle
            pickle.dump(obj, fh, protocol=protocol)
    with open(os.path.join(out, "ind.%s.test.index" % name), "w") as fh:
        fh.write("".join("%d\n" % i for i in test_index))


if __name__ == "__main__":
    out = sys.argv[1]
    write(out, "cora", 2, test_index=[8, 6, 7], n_all=6, n_train=2)
    # CiteSeer-like: test node 7 is missing from tx (its features and label stay zero).
    write(out, "citeseer", 0, test_index=[9, 6, 8], n_all=6, n_train=3)
