#include "psw/common/link_fit.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <set>

#include "psw/common/error.hpp"

namespace psw {

LinkCost fit_link(const std::vector<CopySample>& samples, LinkFitWeighting weighting) {
  std::set<Bytes> sizes;
  for (const auto& s : samples) {
    if (s.bytes <= 0 || s.time <= Duration::zero()) {
      throw InputError(detail::concat("a copy sample needs positive bytes and time, got ", s.bytes, " bytes in ",
                                      s.time.ns(), " ns"));
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) throw InputError("fitting a link needs copies of at least two sizes");
  // time = a + b * bytes; each equation divided by its time for the relative error, or as it
  // is for the absolute error (Note [Link fit weighting]).
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index row = 0; row < n; ++row) {
    const auto& s = samples[static_cast<std::size_t>(row)];
    const double t = static_cast<double>(s.time.ns());
    const double w = weighting == LinkFitWeighting::RelativeError ? 1.0 / t : 1.0;
    a(row, 0) = w;
    a(row, 1) = static_cast<double>(s.bytes) * w;
    y(row) = t * w;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(y);
  if (x(0) < 0) {
    // A negative fixed cost is not a cost: fit the rate alone, through the origin.
    x(0) = 0;
    x(1) = a.col(1).dot(y) / a.col(1).squaredNorm();
  }
  const double fixed_ns = x(0);
  const double ns_per_byte = x(1);
  if (!(ns_per_byte > 0)) throw InputError("the copy samples do not fit a positive bandwidth");
  LinkCost link;
  link.copy_fixed = nanoseconds(static_cast<std::int64_t>(std::llround(fixed_ns)));
  link.bandwidth = Bandwidth::bytes_per_second(static_cast<std::int64_t>(std::llround(1e9 / ns_per_byte)));
  return link;
}

}  // namespace psw
