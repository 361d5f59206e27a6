#include "psw/common/link_fit.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <set>

#include "psw/common/error.hpp"

namespace psw {

LinkCost fit_link(const std::vector<CopySample>& samples) {
  std::set<Bytes> sizes;
  for (const auto& s : samples) {
    if (s.bytes <= 0 || s.time <= Duration::zero()) {
      throw InputError(detail::concat("a copy sample needs positive bytes and time, got ", s.bytes, " bytes in ",
                                      s.time.ns(), " ns"));
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) throw InputError("fitting a link needs copies of at least two sizes");
  // time = a + b * bytes, weighted by 1 / time.
  Eigen::MatrixXd a(static_cast<Eigen::Index>(samples.size()), 2);
  Eigen::VectorXd y(static_cast<Eigen::Index>(samples.size()));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double t = static_cast<double>(samples[i].time.ns());
    const auto row = static_cast<Eigen::Index>(i);
    a(row, 0) = 1.0 / t;
    a(row, 1) = static_cast<double>(samples[i].bytes) / t;
    y(row) = 1.0;
  }
  const Eigen::Vector2d x = a.colPivHouseholderQr().solve(y);
  const double fixed_ns = std::max(0.0, x(0));
  const double ns_per_byte = x(1);
  if (!(ns_per_byte > 0)) throw InputError("the copy samples do not fit a positive bandwidth");
  LinkCost link;
  link.copy_fixed = nanoseconds(static_cast<std::int64_t>(std::llround(fixed_ns)));
  link.bandwidth = Bandwidth::bytes_per_second(static_cast<std::int64_t>(std::llround(1e9 / ns_per_byte)));
  return link;
}

}  // namespace psw
