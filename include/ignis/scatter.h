// Scatter reductions, sparse-dense products and graph utilities: the ops graph neural networks
// are built of (docs/gnn.md). Every function is an op record with its backward in ignis ops.
//
// Graphs are given in COO form, PyTorch Geometric's `edge_index`: an int64 [2, E] tensor whose
// column e is an edge from node edge_index[0][e] (the source) to node edge_index[1][e] (the
// target); messages flow from sources to targets. Sparse matrices (sparse_mm) follow
// torch.sparse instead: indices[0] are rows, indices[1] columns, so A @ X aggregates at the rows.
#pragma once

#include <optional>
#include <string>
#include <tuple>

#include "ignis/tensor.h"

namespace ignis {

/// PyTorch's scatter_reduce: out = self, then out[..., index[p], ...] (index along `dim`) is
/// reduced with src[p] for every position p of index, with reduce one of "sum", "prod", "mean",
/// "amax", "amin". include_self = false leaves self's values out of the reduction at the
/// positions that receive at least one value (the others keep self's value). index has self's
/// rank and is no larger than self (except along dim) and than src. Deterministic: the values
/// reaching one position are combined in index order, whatever the thread count.
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);

/// Softmax of src within groups along dim 0: rows e and e' are in the same group when
/// index[e] == index[e'] (index int64 [E], src [E, ...]). The attention weights of GATConv
/// (softmax over each node's incoming edges). num_segments = -1 takes max(index) + 1.
Tensor segment_softmax(const Tensor& src, const Tensor& index, int64_t num_segments = -1);

/// A @ dense for a sparse COO matrix A of shape [rows, dense.size(0)] given by `indices`
/// (int64 [2, nnz]: row, column) and `values` ([nnz]; undefined: all ones). Duplicate entries
/// add up. rows = -1 takes max(row) + 1. Differentiable in dense and in values. The rows are
/// computed in parallel, each from its entries in their order (deterministic).
Tensor sparse_mm(const Tensor& indices, const Tensor& values, const Tensor& dense,
                 int64_t rows = -1);

/// A @ dense for a sparse CSR matrix A (crow_indices [rows + 1], col_indices [nnz], values
/// [nnz] or undefined for ones) of shape [rows, dense.size(0)]. Differentiable in dense and
/// values.
Tensor sparse_csr_mm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& dense);

/// The sampled dense-dense product: out[e] = dot(a[indices[0][e]], b[indices[1][e]]) for a
/// [rows, F] and b [cols, F]: the gradient of sparse_mm with respect to its values.
Tensor sddmm(const Tensor& indices, const Tensor& a, const Tensor& b);

/// The number of times each value in [0, num_nodes) occurs in index (int64 [E]): in-degrees
/// for index = edge_index[1]. num_nodes = -1 takes max(index) + 1. dtype: float32 by default.
Tensor degree(const Tensor& index, int64_t num_nodes = -1,
              std::optional<DType> dtype = std::nullopt);

/// edge_index with a self-loop (i, i) appended for every node i in [0, num_nodes), and the edge
/// weights with fill_value appended (undefined weights stay undefined). num_nodes = -1 takes
/// max(edge_index) + 1.
std::tuple<Tensor, Tensor> add_self_loops(const Tensor& edge_index,
                                          const Tensor& edge_weight = Tensor(),
                                          double fill_value = 1, int64_t num_nodes = -1);

/// The symmetric normalisation of GCN (Kipf & Welling): optionally adds self-loops, then
/// weights each edge (j -> i) by w / sqrt(deg(j) deg(i)), deg being the weighted in-degree
/// (D^-1/2 (A + I) D^-1/2). Returns the edge_index used and the normalised weights
/// (differentiable in edge_weight). Nodes of degree 0 get weight 0.
std::tuple<Tensor, Tensor> gcn_norm(const Tensor& edge_index, const Tensor& edge_weight = Tensor(),
                                    int64_t num_nodes = -1, bool add_self_loops = true);

}  // namespace ignis
