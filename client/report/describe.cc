// DescribeKernel; see describe.h. The rule table below is the one place the words live.
#include "gpsel/client/report/describe.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gpsel/core/hyperparameters.h"

namespace gpsel::report {
namespace {

// One base kernel of a summand with its fitted values (natural, user units of x).
struct Factor {
  BaseKernel base = BaseKernel::kSE;
  std::map<std::string, double> values;  // by the base kernel's parameter name ("lengthscale")
  std::map<std::string, std::string> names;  // the same parameters' full names ("SE[1].lengthscale")
  int column = -1;                       // the input column it reads (SE[1]); -1 = all of x
};

// What the rules read: the factors of one summand (a product of base kernels, or one).
struct Summand {
  std::vector<Factor> factors;
  // The non-periodic stationary summand of the kernel with the longest lengthscale: it carries
  // the slowest change, the trend, if anything does.
  bool slowest = false;
  double amplitude = -1.0;  // in y's units; negative when not given (DescribeKernel's amplitudes)
  int Count(BaseKernel base) const {
    return static_cast<int>(std::count_if(factors.begin(), factors.end(),
                                          [base](const Factor& f) { return f.base == base; }));
  }
  const Factor* First(BaseKernel base) const {
    for (const Factor& f : factors) {
      if (f.base == base) return &f;
    }
    return nullptr;
  }
  // The stationary factors pinned to columns, when they read two columns or more: an ARD
  // product (SE[*] expanded, SE[0]*SE[2]) has one lengthscale per column, none of which alone
  // is "the" scale of the summand. Empty otherwise.
  std::vector<const Factor*> PerColumnStationary() const {
    std::vector<const Factor*> pinned;
    std::set<int> columns;
    for (const Factor& f : factors) {
      if (IsStationary(f.base) && f.column >= 0) {
        pinned.push_back(&f);
        columns.insert(f.column);
      }
    }
    if (columns.size() < 2) pinned.clear();
    return pinned;
  }
  static bool IsStationary(BaseKernel base) {
    return base == BaseKernel::kSE || base == BaseKernel::kMAT12 || base == BaseKernel::kMAT32 ||
           base == BaseKernel::kMAT52 || base == BaseKernel::kRQ;
  }
  // The stationary factor with the shortest lengthscale (it sets how fast the product varies).
  const Factor* ShortestStationary() const {
    const Factor* best = nullptr;
    for (const Factor& f : factors) {
      const bool stationary = f.base == BaseKernel::kSE || f.base == BaseKernel::kMAT12 ||
                              f.base == BaseKernel::kMAT32 || f.base == BaseKernel::kMAT52 ||
                              f.base == BaseKernel::kRQ;
      if (stationary &&
          (best == nullptr || f.values.at("lengthscale") < best->values.at("lengthscale"))) {
        best = &f;
      }
    }
    return best;
  }
};

std::string WithUnit(double value, const std::string& unit) {
  return unit.empty() ? About(value) : absl::StrCat(About(value), " ", unit);
}

// "about 11 years" (or "about 11 units of x" when x has no unit).
std::string XLength(double value, const Units& units) {
  return absl::StrCat("about ", WithUnit(value, units.x.empty() ? "units of x" : units.x));
}

// Named periods: a period within 5 % of `period` in the unit `unit` reads as `word`.
struct NamedPeriod {
  const char* unit;
  double period;
  const char* word;
};
constexpr NamedPeriod kNamedPeriods[] = {
    {"years", 1.0, "yearly"},      {"year", 1.0, "yearly"},     {"yr", 1.0, "yearly"},
    {"months", 12.0, "yearly"},    {"month", 12.0, "yearly"},   {"days", 365.25, "yearly"},
    {"day", 365.25, "yearly"},     {"days", 7.0, "weekly"},     {"day", 7.0, "weekly"},
    {"hours", 24.0, "daily"},      {"hour", 24.0, "daily"},     {"weeks", 52.18, "yearly"},
    {"seconds", 86400.0, "daily"}, {"minutes", 1440.0, "daily"}};

// How smooth a stationary base kernel's paths are (ABCD: SE "smooth", Matérn ν = ½ "rough").
std::string Smoothness(BaseKernel base) {
  switch (base) {
    case BaseKernel::kMAT12:
      return "rough";
    case BaseKernel::kMAT32:
      return "somewhat rough";
    case BaseKernel::kMAT52:
      return "fairly smooth";
    case BaseKernel::kRQ:
      return "multi-scale smooth";
    default:
      return "smooth";
  }
}

// A stationary summand varying over a fifth of the data's span or more is a trend; so is the
// slowest one (Summand::slowest) down to a twentieth of the span (Mauna Loa's trend under a PER
// summand varies over ~2.4 of 45 years and still carries the whole rise).
bool IsTrend(const Summand& s, const Units& u) {
  // An ARD product varies along several columns, each on its own scale: not a trend in x.
  if (!s.PerColumnStationary().empty()) return false;
  const Factor* f = s.ShortestStationary();
  if (f == nullptr || u.x_range <= 0) return false;
  const double lengthscale = f->values.at("lengthscale");
  return lengthscale >= u.x_range / 5 || (s.slowest && lengthscale >= u.x_range / 20);
}

// The name of column `column` of x: the header's, else "x<column>".
std::string ColumnName(int column, const Units& u) {
  const bool named = column >= 0 && column < static_cast<int>(u.x_columns.size()) &&
                     !u.x_columns[column].empty();
  return named ? u.x_columns[column] : absl::StrCat("x", column);
}

// An ARD product's lengthscales, one per column in column order and in that column's units
// ("about 28 in age, about 8 in bmi"); those the fit left at the prior's value
// (Units::prior_dominated) said to be so, apart, as not structure. Empty unless the summand
// reads two columns or more through pinned stationary factors (Summand::PerColumnStationary).
std::string PerColumnLengthscales(const Summand& s, const Units& u) {
  std::vector<const Factor*> factors = s.PerColumnStationary();
  if (factors.empty()) return "";
  std::stable_sort(factors.begin(), factors.end(),
                   [](const Factor* a, const Factor* b) { return a->column < b->column; });
  std::vector<std::string> determined, prior;
  for (const Factor* f : factors) {
    auto name = f->names.find("lengthscale");
    const bool from_prior = name != f->names.end() &&
                            std::find(u.prior_dominated.begin(), u.prior_dominated.end(),
                                      name->second) != u.prior_dominated.end();
    const std::string column = ColumnName(f->column, u);
    const std::string unit = UnitFromColumnName(column);
    const std::string text = absl::StrCat("about ", WithUnit(f->values.at("lengthscale"), unit),
                                          " in ", column);
    (from_prior ? prior : determined).push_back(text);
  }
  std::string out = determined.empty() ? "none determined by the data"
                                       : absl::StrJoin(determined, ", ");
  if (!prior.empty()) {
    absl::StrAppend(&out, " (not structure: ", absl::StrJoin(prior, ", "),
                    prior.size() == 1 ? " is" : " are",
                    " the prior's value, which the data do not determine)");
  }
  return out;
}

// ---- the rule table ------------------------------------------------------------------------
// A summand's description is its noun (the first matching noun rule) followed by every matching
// modifier, in table order, joined with spaces. `x_range` tells a trend (varying over a fifth of
// the data's span or more) from shorter-term variation.
struct Rule {
  const char* name;  // for tests and the docs
  // Nouns: where the component goes in the sentence, lowest first (trends, then periodic
  // components, then shorter variations, then offsets; ABCD leads with the trend too).
  int order;
  std::function<bool(const Summand&, const Units&)> applies;
  std::function<std::string(const Summand&, const Units&)> words;
};

const std::vector<Rule>& NounRules() {
  static const std::vector<Rule> rules = {
      {"periodic",  // PER anywhere: a repeating pattern
       2, [](const Summand& s, const Units&) { return s.Count(BaseKernel::kPER) > 0; },
       [](const Summand& s, const Units& u) {
         const double period = s.First(BaseKernel::kPER)->values.at("period");
         const std::string unit = absl::AsciiStrToLower(u.x);
         for (const NamedPeriod& named : kNamedPeriods) {
           if (unit == named.unit && std::abs(period / named.period - 1.0) < 0.05) {
             return absl::StrCat("a ", named.word, " periodic component");
           }
         }
         return absl::StrCat("a periodic component with period ", XLength(period, u));
       }},
      {"trend",  // SE, Matérn, RQ whose lengthscale spans a fifth of the data or more
       0, [](const Summand& s, const Units& u) { return IsTrend(s, u); },
       [](const Summand& s, const Units& u) {
         const Factor& f = *s.ShortestStationary();
         return absl::StrCat("a ", Smoothness(f.base), " trend varying over ",
                             XLength(f.values.at("lengthscale"), u));
       }},
      {"variation",  // SE, Matérn, RQ with a shorter lengthscale
       3, [](const Summand& s, const Units&) { return s.ShortestStationary() != nullptr; },
       [](const Summand& s, const Units& u) {
         const Factor& f = *s.ShortestStationary();
         if (const std::string per_column = PerColumnLengthscales(s, u); !per_column.empty()) {
           return absl::StrCat(Smoothness(f.base), " variations with one lengthscale per input ",
                               "column: ", per_column);
         }
         return absl::StrCat(Smoothness(f.base), " variations on a scale of ",
                             XLength(f.values.at("lengthscale"), u));
       }},
      {"polynomial",  // LIN alone, or LIN × LIN × ...: a polynomial of that degree
       1, [](const Summand& s, const Units&) { return s.Count(BaseKernel::kLIN) > 0; },
       [](const Summand& s, const Units&) -> std::string {
         const int degree = s.Count(BaseKernel::kLIN);
         if (degree == 1) return "a linear trend";
         if (degree == 2) return "a quadratic trend";
         return absl::StrCat("a polynomial trend of degree ", degree);
       }},
      {"constant",  // C alone: an offset
       4, [](const Summand&, const Units&) { return true; },
       [](const Summand&, const Units&) -> std::string { return "a constant offset"; }},
  };
  return rules;
}

// The columns the pinned factors read, as "x1" or the column's name, by column index.
std::string PinnedColumns(const Summand& s, const Units& u) {
  std::set<int> columns;
  for (const Factor& f : s.factors) {
    if (f.column >= 0) columns.insert(f.column);
  }
  std::vector<std::string> names;
  for (int column : columns) {
    const bool named = column < static_cast<int>(u.x_columns.size()) &&
                       !u.x_columns[column].empty();
    names.push_back(named ? u.x_columns[column] : absl::StrCat("x", column));
  }
  return absl::StrJoin(names, " and ");
}

const std::vector<Rule>& ModifierRules() {
  static const std::vector<Rule> rules = {
      {"input column",  // a factor pinned to one column of x (SE[1]): where the change happens
       0,
       [](const Summand& s, const Units& u) {
         return !PinnedColumns(s, u).empty() && s.PerColumnStationary().empty();
       },
       [](const Summand& s, const Units& u) { return absl::StrCat("in ", PinnedColumns(s, u)); }},
      {"amplitude",  // the component's size in y's units (not for a constant offset)
       0,
       [](const Summand& s, const Units&) {
         return s.amplitude > 0 && std::any_of(s.factors.begin(), s.factors.end(), [](const Factor& f) {
                  return f.base != BaseKernel::kConst;
                });
       },
       [](const Summand& s, const Units& u) {
         return absl::StrCat("of amplitude about ", WithUnit(s.amplitude, u.y));
       }},
      {"drifting shape",  // PER × stationary: the periodic shape changes over that lengthscale
       0,
       [](const Summand& s, const Units&) {
         return s.Count(BaseKernel::kPER) > 0 && s.ShortestStationary() != nullptr;
       },
       [](const Summand& s, const Units& u) {
         return absl::StrCat("whose shape drifts over ",
                             XLength(s.ShortestStationary()->values.at("lengthscale"), u));
       }},
      {"exact repetition",  // PER alone: the same shape every period
       0,
       [](const Summand& s, const Units&) {
         return s.Count(BaseKernel::kPER) > 0 && s.ShortestStationary() == nullptr;
       },
       [](const Summand&, const Units&) -> std::string { return "that repeats exactly"; }},
      {"growing amplitude",  // LIN × (PER or stationary): amplitude ∝ |x|^degree
       0,
       [](const Summand& s, const Units&) {
         return s.Count(BaseKernel::kLIN) > 0 &&
                (s.Count(BaseKernel::kPER) > 0 || s.ShortestStationary() != nullptr);
       },
       [](const Summand& s, const Units&) -> std::string {
         const int degree = s.Count(BaseKernel::kLIN);
         return degree == 1 ? "with linearly growing amplitude"
                            : absl::StrCat("with amplitude growing like x^", degree);
       }},
  };
  return rules;
}

void CollectLeaves(const KernelExpr& expr, std::vector<const KernelExpr*>* out) {
  if (expr.is_base()) {
    out->push_back(&expr);
    return;
  }
  for (const KernelExpr& operand : expr.operands) CollectLeaves(operand, out);
}

}  // namespace

namespace {
// Words of one operand of a change: the operand described on its own (its parameters are a
// contiguous block of the whole kernel's, in the same post-order, core/hyperparameters.h),
// without the noise.
absl::StatusOr<std::string> DescribeOperand(
    const KernelExpr& operand, const std::vector<HyperparameterInfo>& whole, size_t* next_name,
    const std::function<absl::StatusOr<double>(const std::string&)>& value_of,
    const Standardization& standardization, const Units& units) {
  absl::StatusOr<std::vector<HyperparameterInfo>> own = DescribeHyperparameters(operand, {});
  if (!own.ok()) return own.status();
  std::map<std::string, double> values;
  for (size_t i = 0; i + 1 < own->size(); ++i) {
    if (*next_name >= whole.size()) return absl::InvalidArgumentError("values: too few");
    absl::StatusOr<double> v = value_of(whole[(*next_name)++].name);
    if (!v.ok()) return v.status();
    values[(*own)[i].name] = *v;
  }
  absl::StatusOr<double> noise = value_of(kNoiseName);
  if (!noise.ok()) return noise.status();
  values[kNoiseName] = *noise;
  absl::StatusOr<KernelDescription> words =
      DescribeKernel(operand, values, standardization, units);
  if (!words.ok()) return words.status();
  std::vector<std::string> texts;
  for (const ComponentDescription& c : words->components) texts.push_back(c.text);
  return absl::StrJoin(texts, " plus ");
}
}  // namespace

static absl::StatusOr<std::string> DescribeChangePart(
    const KernelExpr& part, const std::vector<HyperparameterInfo>& whole, size_t* next_name,
    const std::function<absl::StatusOr<double>(const std::string&)>& value_of,
    const Standardization& standardization, const Units& units) {
  const size_t first_name = *next_name;
  const std::string where = units.x.empty() ? "" : absl::StrCat(" ", units.x);
  // x of a location (a fraction of the range, 1 = the first input) and its "± sd".
  auto place = [&](double location) {
    std::string text = About(units.x_min + (location - 1.0) * units.x_range);
    if (units.x_range <= 0) text = absl::StrCat("position ", About(location));
    return text;
  };
  auto spread = [&](const std::string& label) -> std::string {
    auto sd = units.change_location_sd.find(label);
    if (sd == units.change_location_sd.end()) return "";
    return absl::StrCat(" (± ", About(sd->second), where, ")");
  };
  if (!part.is_change()) {
    // A change inside a product or deeper: the parameters of the whole part are skipped, the
    // last change node's location named.
    absl::StatusOr<std::vector<HyperparameterInfo>> own = DescribeHyperparameters(part, {});
    if (!own.ok()) return own.status();
    std::string label;
    double location = 0.0;
    for (size_t i = 0; i + 1 < own->size(); ++i) {
      const HyperparameterInfo& info = whole[first_name + i];
      if (info.IsChange() && info.parameter == "location") {
        absl::StatusOr<double> v = value_of(info.name);
        if (!v.ok()) return v.status();
        location = *v;
        label = info.name.substr(0, info.name.find('.'));
      }
    }
    *next_name = first_name + own->size() - 1;
    return absl::StrCat(ToString(part), " with a change at about ", place(location),
                        spread(label));
  }
  absl::StatusOr<std::string> first =
      DescribeOperand(part.operands[0], whole, next_name, value_of, standardization, units);
  if (!first.ok()) return first.status();
  absl::StatusOr<std::string> second =
      DescribeOperand(part.operands[1], whole, next_name, value_of, standardization, units);
  if (!second.ok()) return second.status();
  // The node's own parameters follow its operands'.
  const std::string prefix = whole[*next_name].name.substr(0, whole[*next_name].name.find('.'));
  std::map<std::string, double> own;
  for (const std::string& parameter : ChangeParameterNames(part.kind)) {
    if (*next_name >= whole.size()) return absl::InvalidArgumentError("values: too few");
    absl::StatusOr<double> v = value_of(whole[(*next_name)++].name);
    if (!v.ok()) return v.status();
    own[parameter] = *v;
  }
  // With the regimes' levels: "from about 1100 (<first>) to about 850 (<second>)".
  std::string first_text = *first, second_text = *second;
  if (auto levels = units.change_levels.find(prefix); levels != units.change_levels.end()) {
    const std::string y_unit = units.y.empty() ? "" : absl::StrCat(" ", units.y);
    first_text = absl::StrCat("about ", About(levels->second.first), y_unit, " (", *first, ")");
    second_text = absl::StrCat("about ", About(levels->second.second), y_unit, " (", *second, ")");
  }
  if (part.kind == KernelExpr::Kind::kChangePoint) {
    return absl::StrCat("a change at about ", place(own["location"]), spread(prefix),
                        " from ", first_text, " to ", second_text);
  }
  const double half = 0.5 * own["width"];
  return absl::StrCat(first_text, ", with a window from about ", place(own["location"] - half),
                      " to ", place(own["location"] + half), spread(prefix), " of ",
                      second_text);
}

std::string UnitFromColumnName(const std::string& name) {
  static constexpr const char* kTimeUnits[] = {"year", "month",  "week",  "day",
                                               "hour", "minute", "second"};
  const std::string lower = absl::AsciiStrToLower(name);
  for (const char* unit : kTimeUnits) {
    // The whole name, its plural, or the unit in parentheses ("time (days)").
    const std::string singular = unit, plural = absl::StrCat(unit, "s");
    if (lower == singular || lower == plural ||
        lower.find(absl::StrCat("(", singular)) != std::string::npos) {
      return plural;
    }
  }
  return "";
}

std::string About(double value) {
  if (value == 0) return "0";
  const double magnitude = std::floor(std::log10(std::abs(value)));
  if (magnitude >= 4 || magnitude <= -4) return absl::StrFormat("%.1e", value);
  // Two significant digits, no trailing zeros: 10.7 → "11", 4.13 → "4.1", 0.287 → "0.29".
  const int decimals = std::max(0, 1 - static_cast<int>(magnitude));
  std::string text = absl::StrFormat("%.*f", decimals, value);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

absl::StatusOr<KernelDescription> DescribeKernel(
    const KernelExpr& kernel, const std::map<std::string, double>& values,
    const Standardization& standardization, const Units& units,
    const std::map<std::string, double>& amplitudes) {
  absl::StatusOr<std::vector<HyperparameterInfo>> names = DescribeHyperparameters(kernel, {});
  if (!names.ok()) return names.status();
  auto value_of = [&values](const std::string& name) -> absl::StatusOr<double> {
    auto it = values.find(name);
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("values: no value for '", name, "'"));
    }
    return it->second;
  };
  const std::vector<KernelExpr> parts =
      kernel.kind == KernelExpr::Kind::kSum ? kernel.operands : std::vector<KernelExpr>{kernel};
  KernelDescription out;
  std::vector<Summand> summands;  // one per part, in canonical order
  std::vector<int> orders;        // sentence position of each component (Rule::order)
  size_t next_name = 0;           // names follow the canonical leaf order (core/hyperparameters.h)
  std::map<size_t, std::string> change_texts;  // parts with a change node: their words
  for (const KernelExpr& part : parts) {
    if (ContainsChange(part)) {
      absl::StatusOr<std::string> text = DescribeChangePart(part, *names, &next_name, value_of,
                                                            standardization, units);
      if (!text.ok()) return text.status();
      change_texts[summands.size()] = *text;
      summands.emplace_back();
      continue;
    }
    std::vector<const KernelExpr*> leaves;
    CollectLeaves(part, &leaves);
    Summand summand;
    for (const KernelExpr* leaf : leaves) {
      Factor factor;
      factor.base = leaf->base;
      factor.column = leaf->active_dim;
      for (const std::string& parameter : BaseKernelParameterNames(leaf->base)) {
        factor.names[parameter] = (*names)[next_name].name;
        absl::StatusOr<double> v = value_of((*names)[next_name++].name);
        if (!v.ok()) return v.status();
        factor.values[parameter] = *v;
      }
      summand.factors.push_back(std::move(factor));
    }
    if (auto amplitude = amplitudes.find(ToString(part)); amplitude != amplitudes.end()) {
      summand.amplitude = amplitude->second;
    }
    summands.push_back(std::move(summand));
  }
  // The slowest non-periodic stationary summand (IsTrend).
  int slowest = -1;
  for (size_t k = 0; k < summands.size(); ++k) {
    const Factor* f = summands[k].ShortestStationary();
    if (f == nullptr || summands[k].Count(BaseKernel::kPER) > 0) continue;
    if (slowest < 0 || f->values.at("lengthscale") >
                           summands[slowest].ShortestStationary()->values.at("lengthscale")) {
      slowest = static_cast<int>(k);
    }
  }
  if (slowest >= 0) summands[slowest].slowest = true;
  for (size_t k = 0; k < summands.size(); ++k) {
    const Summand& summand = summands[k];
    const KernelExpr& part = parts[k];
    if (auto text = change_texts.find(k); text != change_texts.end()) {
      orders.push_back(0);
      out.components.push_back(ComponentDescription{ToString(part), text->second});
      continue;
    }
    std::vector<std::string> words;
    int order = 0;
    for (const Rule& rule : NounRules()) {
      if (rule.applies(summand, units)) {
        words.push_back(rule.words(summand, units));
        order = rule.order;
        break;
      }
    }
    orders.push_back(order);
    for (const Rule& rule : ModifierRules()) {
      if (rule.applies(summand, units)) words.push_back(rule.words(summand, units));
    }
    out.components.push_back(ComponentDescription{ToString(part), absl::StrJoin(words, " ")});
  }
  absl::StatusOr<double> noise = value_of(kNoiseName);
  if (!noise.ok()) return noise.status();
  const double scale = standardization.applied ? standardization.scale : 1.0;
  out.noise = absl::StrCat("noise of sd ", WithUnit(std::sqrt(*noise) * scale, units.y));
  std::vector<size_t> sentence(out.components.size());
  for (size_t i = 0; i < sentence.size(); ++i) sentence[i] = i;
  std::stable_sort(sentence.begin(), sentence.end(),
                   [&orders](size_t a, size_t b) { return orders[a] < orders[b]; });
  std::vector<std::string> all;
  for (size_t i : sentence) all.push_back(out.components[i].text);
  all.push_back(out.noise);
  out.text = absl::StrJoin(all, ", plus ");
  return out;
}

}  // namespace gpsel::report
