#include "costmodel/calibration.h"

namespace meshtune::costmodel {

const char* ToString(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::kNorm:
      return "norm";
    case ElementwiseOp::kBiasDropoutAdd:
      return "bias_dropout_add";
    case ElementwiseOp::kResidualAdd:
      return "residual_add";
    case ElementwiseOp::kGelu:
      return "gelu";
    case ElementwiseOp::kSwiglu:
      return "swiglu";
    case ElementwiseOp::kRope:
      return "rope";
    case ElementwiseOp::kCrossEntropy:
      return "cross_entropy";
    case ElementwiseOp::kEmbedding:
      return "embedding";
    case ElementwiseOp::kCrossEntropyNative:
      return "cross_entropy_native";
    case ElementwiseOp::kCrossEntropyTe:
      return "cross_entropy_te";
  }
  return "unknown";
}

bool ParseElementwiseOp(const std::string& name, ElementwiseOp* op) {
  for (int i = 0; i < kNumElementwiseOps; ++i) {
    const auto candidate = static_cast<ElementwiseOp>(i);
    if (name == ToString(candidate)) {
      *op = candidate;
      return true;
    }
  }
  return false;
}

// The sources of these numbers are in calibration.h.
double ElementwiseBytes(ElementwiseOp op, bool backward) {
  switch (op) {
    case ElementwiseOp::kNorm:
      return backward ? 8.0 : 4.0;
    case ElementwiseOp::kBiasDropoutAdd:
      return backward ? 14.0 : 7.0;
    case ElementwiseOp::kResidualAdd:
      return backward ? 12.0 : 6.0;
    case ElementwiseOp::kGelu:
      return backward ? 8.0 : 4.0;
    case ElementwiseOp::kSwiglu:
      return backward ? 12.0 : 6.0;
    case ElementwiseOp::kRope:
      return backward ? 8.0 : 4.0;
    case ElementwiseOp::kCrossEntropy:
      return backward ? 14.0 : 38.0;
    case ElementwiseOp::kEmbedding:
      return 8.0;
    case ElementwiseOp::kCrossEntropyNative:
      return backward ? 6.0 : 22.0;
    case ElementwiseOp::kCrossEntropyTe:
      return backward ? 4.0 : 6.0;
  }
  return 0.0;
}

}  // namespace meshtune::costmodel
