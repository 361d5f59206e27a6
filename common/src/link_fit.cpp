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
  // time = a + b * bytes, each equation divided by its time: least squares on relative error.
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index row = 0; row < n; ++row) {
    const auto& s = samples[static_cast<std::size_t>(row)];
    const double t = static_cast<double>(s.time.ns());
    a(row, 0) = 1.0 / t;
    a(row, 1) = static_cast<double>(s.bytes) / t;
    y(row) = 1.0;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(y);
  // A negative fixed cost is not a cost: fit the rate alone, through the origin.
  if (x(0) < 0) x = Eigen::Vector2d(0, a.col(1).dot(y) / a.col(1).squaredNorm());
  if (weighting == LinkFitWeighting::AbsoluteError) {
    // Keep that fixed cost (the small copies') and choose the rate that minimises the squared
    // error in time of every copy: sum(bytes * (time - fixed)) / sum(bytes^2).
    double num = 0;
    double den = 0;
    for (const auto& s : samples) {
      const double bytes = static_cast<double>(s.bytes);
      num += bytes * (static_cast<double>(s.time.ns()) - x(0));
      den += bytes * bytes;
    }
    x(1) = num / den;
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
