#pragma once
// The dense matrix types every layer shares (weights hold them, the CPU engine computes with
// them): row-major, as deepmd-kit stores its (in, out) weights. Here rather than in engine/ so
// that model/ (weights) does not depend on the engine.
// GCC 12 warns (-Wmaybe-uninitialized) inside its own AVX-512 intrinsics wherever Eigen's
// reductions are inlined under -march=native (the intrinsics' deliberately undefined operand;
// GCC bug 105593, fixed in GCC 13): ~570 lines of every CI log about no code of ours. Silenced
// for Eigen's headers, which bring those intrinsics in; our own code keeps the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

namespace sezm {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;

}  // namespace sezm
