// Host-side validation of everything checkable without touching device memory.
// Each failure names the argument and the expected value; on failure the entry
// points launch nothing.
#pragma once

#include "blockattn/blockattn.h"

namespace blockattn {

// Everything but the workspace.
Status validate_forward_tensors(const ForwardArgs& args);
Status validate_forward(const ForwardArgs& args, const void* workspace, size_t workspace_bytes);
Status validate_backward_tensors(const BackwardArgs& args);
Status validate_backward(const BackwardArgs& args, const void* workspace, size_t workspace_bytes);

}  // namespace blockattn
