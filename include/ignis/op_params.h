// The parameter lists of the ops generated from ignis/activation_ops.def: a flat list of
// (name, default) pairs, 0 to 3 of them, each a Scalar, which each include of the list turns into
// what it needs (a C++ parameter list, the schema's arguments, a call's arguments) with
// IGNIS_PARAMS_MAP(m, name1, default1, name2, default2, ...): m(name1, default1) m(name2, ...).
#pragma once

#define IGNIS_PP_CAT(a, b) IGNIS_PP_CAT_(a, b)
#define IGNIS_PP_CAT_(a, b) a##b
/// The number of (name, default) pairs.
#define IGNIS_PARAMS_N(...) IGNIS_PARAMS_N_(__VA_ARGS__ __VA_OPT__(, ) 3, 3, 2, 2, 1, 1, 0, 0)
#define IGNIS_PARAMS_N_(a, b, c, d, e, f, n, ...) n
/// m(name, default) for each pair, juxtaposed (m adds its own separator).
#define IGNIS_PARAMS_MAP(m, ...) \
  IGNIS_PP_CAT(IGNIS_PARAMS_MAP, IGNIS_PARAMS_N(__VA_ARGS__))(m __VA_OPT__(, ) __VA_ARGS__)
#define IGNIS_PARAMS_MAP0(m)
#define IGNIS_PARAMS_MAP1(m, n1, d1) m(n1, d1)
#define IGNIS_PARAMS_MAP2(m, n1, d1, n2, d2) m(n1, d1) m(n2, d2)
#define IGNIS_PARAMS_MAP3(m, n1, d1, n2, d2, n3, d3) m(n1, d1) m(n2, d2) m(n3, d3)

// The common pieces, each with a leading comma (they follow `self`):
/// `, Scalar alpha = 1` (declarations)
#define IGNIS_PARAM_DECL(n, d) , ::ignis::Scalar n = d
/// `, Scalar alpha` (definitions)
#define IGNIS_PARAM_DEF(n, d) , ::ignis::Scalar n
/// `, Scalar` (the C++ signature of a record)
#define IGNIS_PARAM_TYPE(n, d) , ::ignis::Scalar
/// `, Scalar alpha=1` (the schema)
#define IGNIS_PARAM_SCHEMA(n, d) ", Scalar " #n "=" #d
/// `, alpha` (a call)
#define IGNIS_PARAM_ARG(n, d) , n
