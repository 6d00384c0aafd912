#include "batch_summary.hpp"

#include "vlattice/atomic_file.hpp"

#include <filesystem>
#include <iterator>

namespace vlattice::cli {

namespace {

std::string csv_field(const nlohmann::json& value) {
    if (value.is_null()) {
        return "";
    }
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (text.find_first_of(",\"\n") != std::string::npos) {
        std::string quoted = "\"";
        for (char c : text) {
            quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        }
        return quoted + "\"";
    }
    return text;
}

}  // namespace

void write_summary(const std::string& folder, const nlohmann::json& rows) {
    namespace fs = std::filesystem;
    AtomicFile json((fs::path(folder) / "summary.json").string());
    json.stream() << rows.dump(2) << '\n';
    json.commit();

    static const char* const kColumns[] = {"dataset", "file", "n", "d", "m", "bytes_per_vector", "ratio", "residuals",
                                           "energy", "mse", "recall_at_10", "train_rows"};
    static const char* const kSeconds[] = {"load", "init", "fit", "evaluate", "write"};
    static const char* const kOutcome[] = {"device", "status", "error", "redone"};
    AtomicFile csv((fs::path(folder) / "summary.csv").string());
    for (const char* column : kColumns) {
        csv.stream() << column << ',';
    }
    for (const char* phase : kSeconds) {
        csv.stream() << phase << "_seconds,";
    }
    for (const char* column : kOutcome) {
        csv.stream() << column << (column == kOutcome[std::size(kOutcome) - 1] ? '\n' : ',');
    }
    for (const nlohmann::json& row : rows) {
        for (const char* column : kColumns) {
            csv.stream() << csv_field(row.value(column, nlohmann::json())) << ',';
        }
        const nlohmann::json seconds = row.value("seconds", nlohmann::json::object());
        for (const char* phase : kSeconds) {
            csv.stream() << csv_field(seconds.value(phase, nlohmann::json())) << ',';
        }
        for (const char* column : kOutcome) {
            csv.stream() << csv_field(row.value(column, nlohmann::json()))
                         << (column == kOutcome[std::size(kOutcome) - 1] ? '\n' : ',');
        }
    }
    csv.commit();
}

}  // namespace vlattice::cli
