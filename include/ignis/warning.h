// Warnings: things that run but likely are not what the caller meant (PyTorch's TORCH_WARN),
// such as a loss whose target broadcasts against its input. By default each is printed once per
// place in ignis that raises it, as "ignis warning: <message>" on stderr; a handler can collect
// them instead (tests, a GUI, a logger).
#pragma once

#include <functional>
#include <string>

namespace ignis {

using WarningHandler = std::function<void(const std::string& message)>;

/// Sends every warning to `handler` (an empty one restores printing to stderr); returns the
/// previous handler. Thread-safe; the handler may be called from any thread.
WarningHandler set_warning_handler(WarningHandler handler);

/// Raises a warning: the handler's, or stderr's, every time it is called.
void warn(const std::string& message);

}  // namespace ignis
