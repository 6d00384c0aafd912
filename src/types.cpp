#include "vlattice/types.hpp"

namespace vlattice {

const char* metric_name(Metric metric) {
    return metric == Metric::angular ? "angular" : "l2";
}

Metric parse_metric(const std::string& name) {
    if (name == "l2" || name == "euclidean") {
        return Metric::l2;
    }
    if (name == "angular" || name == "cosine") {
        return Metric::angular;
    }
    throw Error("metric: expected 'l2' or 'angular', got '" + name + "'");
}

}  // namespace vlattice
