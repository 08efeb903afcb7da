// Translation scores as papers report them: sacreBLEU's default BLEU (cased, 13a, detokenized
// text against the raw references), its lower-cased BLEU and chrF2, each with its signature.
#pragma once

#include <string>
#include <vector>

#include "tapestry/models/bleu.h"
#include "tapestry/models/chrf.h"

namespace tapestry::models {

struct FieldScores {
  BleuScore bleu;     // case:mixed, sacreBLEU's default
  BleuScore bleu_lc;  // case:lc
  ChrfScore chrf;     // chrF2, case:mixed
  std::string bleu_signature, bleu_lc_signature, chrf_signature;
  // Three lines: each score as sacreBLEU prints it, then its signature, e.g.
  //   BLEU = 38.12 70.1/46.3/32.0/22.6 (BP = 1.000 ratio = 1.002 hyp_len = 12 ref_len = 12)
  //     nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry
  // `indent` starts every line.
  std::string lines(const std::string& indent = "") const;
};

// hyps[i] against refs[i] (one reference each, as many lines as hyps).
FieldScores field_scores(const std::vector<std::string>& hyps,
                         const std::vector<std::string>& refs);

}  // namespace tapestry::models
