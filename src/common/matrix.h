#pragma once
// The dense matrix types every layer shares (weights hold them, the CPU engine computes with
// them): row-major, as deepmd-kit stores its (in, out) weights. Here rather than in engine/ so
// that model/ (weights) does not depend on the engine.
#include <Eigen/Core>

namespace sezm {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;

}  // namespace sezm
