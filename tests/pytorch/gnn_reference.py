#!/usr/bin/env python3
"""PyTorch's answers for ignis's graph ops (tests/test_gnn_torch.cpp): random cases of
scatter_reduce (every reduction, with and without include_self; a vector index expanded over the
features, as message passing uses it, and a general index), segment softmax, the sparse-dense
product and GCN's normalisation, with the gradients of sum(out * g). Written to a safetensors
file (by hand: struct + json), float64.

  /usr/bin/python3 gnn_reference.py OUT.safetensors
"""
import json
import struct
import sys

import torch

torch.manual_seed(0)
out = {}


def put(name, t):
    out[name] = t.detach().contiguous()


def grads(fn, inputs, name):
    """Runs fn on copies of `inputs` requiring grad; stores out and d(sum(out * g))/d(input)."""
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    y = fn(*leaves)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    put(name + ".out", y)
    put(name + ".g", g)
    for k, leaf in enumerate(leaves):
        put(name + ".grad%d" % k, leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))


# ---- scatter_reduce
n, e, f = 10, 40, 3
vec_index = torch.randint(0, n - 2, (e,))  # nodes n-2 and n-1 receive nothing
cases = {
    "vector": (0, vec_index.unsqueeze(1).expand(e, f).contiguous(), (n, f), (e, f)),
    # (src as large as the index: torch 1.13 fails its backward for a larger src)
    "general": (1, torch.randint(0, 5, (4, 6)), (4, 5), (4, 6)),
}
for cname, (dim, index, self_shape, src_shape) in cases.items():
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            lo, hi = (0.5, 1.5) if reduce == "prod" else (-2.0, 2.0)
            self_t = torch.rand(self_shape, dtype=torch.float64) * (hi - lo) + lo
            src_t = torch.rand(src_shape, dtype=torch.float64) * (hi - lo) + lo
            name = "sr.%s.%s.%d" % (cname, reduce, include_self)
            put(name + ".self", self_t)
            put(name + ".src", src_t)
            put(name + ".index", index)
            put(name + ".dim", torch.tensor(dim))
            grads(lambda s, x, d=dim, i=index, r=reduce, inc=include_self:
                  s.scatter_reduce(d, i, x, r, include_self=inc), [self_t, src_t], name)

# ---- segment softmax: softmax over the rows of each group (one group empty)
src = torch.randn(12, 2, dtype=torch.float64)
seg = torch.tensor([0, 2, 0, 1, 1, 2, 4, 0, 2, 2, 1, 4])


def segment_softmax(x):
    y = torch.zeros_like(x)
    for s in range(5):
        m = seg == s
        if m.any():
            y = y.masked_scatter(m.unsqueeze(1).expand_as(x), torch.softmax(x[m], dim=0))
    return y


put("ss.src", src)
put("ss.index", seg)
grads(segment_softmax, [src], "ss")

# ---- sparse @ dense, with duplicates: A[row, col] += value
rows, cols, nnz = 8, 6, 30
idx = torch.stack([torch.randint(0, rows, (nnz,)), torch.randint(0, cols, (nnz,))])
vals = torch.randn(nnz, dtype=torch.float64)
dense = torch.randn(cols, 4, dtype=torch.float64)


def spmm(v, d):
    a = torch.zeros(rows, cols, dtype=torch.float64).index_put((idx[0], idx[1]), v, accumulate=True)
    return a @ d


put("sp.indices", idx)
put("sp.values", vals)
put("sp.dense", dense)
grads(spmm, [vals, dense], "sp")

# ---- GCN normalisation (self-loops added), as PyTorch Geometric's gcn_norm computes it
ei = torch.stack([torch.randint(0, 7, (20,)), torch.randint(0, 7, (20,))])
ew = torch.rand(20, dtype=torch.float64) + 0.5


def gcn_norm(w):
    loop = torch.arange(7)
    row = torch.cat([ei[0], loop])
    col = torch.cat([ei[1], loop])
    w = torch.cat([w, torch.ones(7, dtype=torch.float64)])
    deg = torch.zeros(7, dtype=torch.float64).scatter_add(0, col, w)
    dis = deg.pow(-0.5)
    dis = dis.masked_fill(dis == float("inf"), 0)
    return dis[row] * w * dis[col]


put("gn.edge_index", ei)
put("gn.weight", ew)
grads(gcn_norm, [ew], "gn")

NAMES = {torch.float64: "F64", torch.int64: "I64"}
header = {"__metadata__": {"format": "pt", "source": "torch " + torch.__version__}}
blobs, offset = [], 0
for name, t in out.items():
    flat = t.reshape(-1)
    data = bytes(flat.view(torch.uint8).tolist()) if flat.numel() else b""
    header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
h = json.dumps(header).encode("utf-8")
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as fh:
    fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print("WROTE", len(out), "tensors with torch", torch.__version__)
