#include "vlattice/types.hpp"

#include <algorithm>

namespace vlattice {

const char* metric_name(Metric metric) {
    return metric == Metric::angular ? "angular" : metric == Metric::ip ? "ip" : "l2";
}

Metric parse_metric(const std::string& name) {
    if (name == "l2" || name == "euclidean") {
        return Metric::l2;
    }
    if (name == "angular" || name == "cosine") {
        return Metric::angular;
    }
    if (name == "ip" || name == "dot") {
        return Metric::ip;
    }
    throw Error("metric: expected 'l2', 'angular' or 'ip', got '" + name + "'");
}

Matrix select_rows(const Matrix& from, const std::vector<std::uint32_t>& rows) {
    Matrix out(rows.size(), from.cols);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        std::copy(from.row(rows[r]), from.row(rows[r]) + from.cols, out.row(r));
    }
    return out;
}

}  // namespace vlattice
