#pragma once
// Charge/spin conditioning of the DPA4 descriptor (descriptor.add_chg_spin_ebd; docs/model.md
// §10). The frame's total charge Q and spin multiplicity S are inputs of a calculation, not
// weights: the front end (pair_style ... charge_spin Q S, sezm-eval --charge-spin Q S) or the
// model's default_chg_spin gives them. Because the condition is one C-vector for every atom of
// the frame and deepmd-kit adds it to the type embedding, it is folded into the type_embedding
// rows here, before an engine is made: both engines then compute the conditioned model
// unchanged (the CUDA engine uploads the folded table).
#include <optional>
#include <string>

#include "model/weights.h"

namespace sezm {

struct ChargeSpin {
  double charge = 0.0;
  double spin = 0.0;
};

// What apply_charge_spin used, for the front ends' logs.
struct ChargeSpinUse {
  bool conditioned = false;   // the model has the embedding
  bool from_default = false;  // the model's default_chg_spin was used
  ChargeSpin value;
};

// Resolves (Q, S) for `w` (`given` from the user, else the model's default_chg_spin) and adds the
// condition to every row of w.type_embedding. Errors (sezm::Error, naming `source`): `given` for a
// model without the embedding; neither `given` nor a default for a model with it; Q outside the
// integers -100..99 or S outside 0..99 (the rows of deepmd-kit's tables). A model without the
// embedding and no `given` is left alone.
template <class T>
ChargeSpinUse apply_charge_spin(ModelW<T>& w, const std::optional<ChargeSpin>& given, const std::string& source);

// Throws when `w` needs a charge/spin condition that was not applied (engines call it).
template <class T>
void require_charge_spin_applied(const ModelW<T>& w);

}  // namespace sezm
