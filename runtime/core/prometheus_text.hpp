// runtime/core/prometheus_text.hpp — writes Prometheus' text exposition format 0.0.4: families,
// samples and histograms, with label values escaped as the format requires.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace idem::detail {

using metric_label = std::pair<std::string_view, std::string_view>;  // name, value

class exposition_writer {
 public:
  // The HELP and TYPE lines that open a family; every sample of the family must follow them
  // before the next family starts. `type` is counter, gauge or histogram.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, std::initializer_list<metric_label> labels, std::uint64_t value);
  void sample(std::string_view name, std::initializer_list<metric_label> labels, double value);
  // A histogram's _bucket lines (cumulative counts, one per bound, then +Inf), _sum and _count.
  // `cumulative` holds bounds.size() + 1 counts.
  void histogram(std::string_view name, std::initializer_list<metric_label> labels, std::span<const double> bounds,
                 std::span<const std::uint64_t> cumulative, double sum);

  [[nodiscard]] std::string take() && { return std::move(text_); }

 private:
  // name{labels[,extra]} without the value.
  void series(std::string_view name, std::initializer_list<metric_label> labels, const metric_label* extra);

  std::string text_;
};

}  // namespace idem::detail
