// CUDA's big libraries (cuBLAS, cuDNN) are opened at their first use, not linked: cuBLAS alone
// is over half a gigabyte, and loading it would cost every program using libignis 0.6 s at start
// (and fail it where the library is absent). A LazyLibrary finds the library by its soname on
// the loader's path, else in the CUDA toolkit directory this build used, and resolves symbols.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ignis/error.h"

namespace ignis::cuda::detail {

class LazyLibrary {
 public:
  /// `soname` such as "libcublas.so.13"; `what` names it in errors ("cuBLAS").
  LazyLibrary(std::string soname, std::string what)
      : soname_(std::move(soname)), what_(std::move(what)) {}

  /// The symbol's address as F; throws naming the library and why it could not be loaded.
  template <class F>
  F get(const char* name) {
    std::call_once(once_, [this] { open(); });
    IGNIS_CHECK(handle_ != nullptr, what_, " (", soname_, ") could not be loaded: ", error_);
    void* p = dlsym(handle_, name);
    IGNIS_CHECK(p != nullptr, what_, " (", soname_, ") has no symbol ", name);
    return reinterpret_cast<F>(p);
  }

 private:
  void open() {
    handle_ = dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const std::string first = dlerror();
      handle_ = dlopen((std::string(IGNIS_CUDA_LIBDIR) + "/" + soname_).c_str(),
                       RTLD_NOW | RTLD_LOCAL);
      if (handle_ == nullptr) error_ = first;
    }
  }
  std::string soname_, what_, error_;
  std::once_flag once_;
  void* handle_ = nullptr;
};

/// The struct of a library's resolved entry points (a LazyLibrary member, then one member per
/// symbol), made at the first call. A failed load throws there, and is tried again at the next.
template <class Api>
const Api& lazy_api() {
  static std::atomic<const Api*> ready{nullptr};  // read without the lock on every call
  if (const Api* a = ready.load(std::memory_order_acquire)) return *a;
  static std::mutex mu;
  static std::unique_ptr<Api> api;
  std::lock_guard<std::mutex> g(mu);
  if (!api) api = std::make_unique<Api>();
  ready.store(api.get(), std::memory_order_release);
  return *api;
}

}  // namespace ignis::cuda::detail
