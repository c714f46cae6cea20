#include "model/charge_spin.h"

#include <cmath>
#include <sstream>

#include "common/error.h"

namespace sezm {
namespace {

// deepmd-kit indexes its tables with int64(Q) + 100 and int64(S): 200 charge rows, 100 spin rows.
// A non-integer value would be truncated there; we refuse it instead of guessing.
int table_row(double value, double lo, double hi, const char* what, const std::string& source) {
  if (!(value >= lo && value <= hi) || std::floor(value) != value) {
    std::ostringstream o;
    o << source << ": charge_spin " << what << " = " << value << " is not an integer in [" << lo << ", " << hi
      << "] (the model's " << what << " embedding has rows for those values)";
    throw Error(o.str());
  }
  return static_cast<int>(value);
}

}  // namespace

template <class T>
ChargeSpinUse apply_charge_spin(ModelW<T>& w, const std::optional<ChargeSpin>& given, const std::string& source) {
  const ModelConfig& cfg = w.cfg;
  ChargeSpinUse use;
  if (!cfg.chg_spin) {
    if (given)
      throw Error(source + ": charge_spin was given, but the model has no charge/spin embedding "
                           "(descriptor.add_chg_spin_ebd is false); drop the charge_spin setting");
    return use;
  }
  if (w.cs_applied) throw Error(source + ": the charge/spin condition was already applied to these weights");
  use.conditioned = true;
  if (given) {
    use.value = *given;
  } else if (cfg.has_default_chg_spin) {
    use.value = ChargeSpin{cfg.default_charge, cfg.default_spin};
    use.from_default = true;
  } else {
    throw Error(source + ": the model is conditioned on the frame's charge and spin (descriptor.add_chg_spin_ebd) "
                         "and has no default_chg_spin; give them (pair_style sezm ... charge_spin Q S, "
                         "sezm-eval --charge-spin Q S)");
  }
  const int q = table_row(use.value.charge, -100, 99, "charge", source) + 100;
  const int s = table_row(use.value.spin, 0, 99, "spin", source);
  const int C = cfg.channels;
  // condition = silu([Ec[Q+100], Es[S]] W + b), one C-vector for the frame (docs/model.md §10).
  RowVec<T> in(2 * C);
  in.leftCols(C) = w.cs_charge.row(q);
  in.rightCols(C) = w.cs_spin.row(s);
  RowVec<T> cond = in * w.cs_mix_w;
  for (int c = 0; c < C; ++c) {
    const T x = cond[c] + w.cs_mix_b[c];
    cond[c] = x / (T(1) + std::exp(-x));
  }
  for (int t = 0; t < w.type_embedding.rows(); ++t) w.type_embedding.row(t) += cond;
  w.cs_applied = true;
  return use;
}

template <class T>
void require_charge_spin_applied(const ModelW<T>& w) {
  if (w.cfg.chg_spin && !w.cs_applied)
    throw Error("the model is conditioned on the frame's charge and spin (descriptor.add_chg_spin_ebd), but no "
                "charge/spin condition was applied to its weights (sezm::apply_charge_spin)");
}

template ChargeSpinUse apply_charge_spin<double>(ModelW<double>&, const std::optional<ChargeSpin>&, const std::string&);
template ChargeSpinUse apply_charge_spin<float>(ModelW<float>&, const std::optional<ChargeSpin>&, const std::string&);
template void require_charge_spin_applied<double>(const ModelW<double>&);
template void require_charge_spin_applied<float>(const ModelW<float>&);

}  // namespace sezm
