// vlattice info IN.vlat [--json]: what a .vlat holds and what it costs per vector.
#include "activity.hpp"
#include "commands.hpp"
#include "options.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/json_text.hpp"
#include "vlattice/printable.hpp"
#include "vlattice/rate.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "info",
    "IN.vlat [--json]",
    "IN.vlat",
    "Prints the header, the sections with their sizes and checksums, the cost per\n"
    "vector and the stored run metadata of a .vlat file, after checking every\n"
    "checksum. Control characters in the metadata are printed as escapes (\\n,\n"
    "\\x1b); --json escapes every character outside ASCII as \\uXXXX.",
};

std::string hex64(std::uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
    return text;
}

// One object with every field; the text output is a rendering of it, so the two cannot disagree.
nlohmann::json describe(const VlatFile& file, const std::string& path) {
    const std::uint64_t m = file.anchors.rows;
    const unsigned bits = assignment_bits(m);
    const auto n = static_cast<double>(file.n);
    const auto bytes = static_cast<double>(file.file_bytes);
    nlohmann::json sections = nlohmann::json::array();
    for (const VlatSection& section : file.sections) {
        sections.push_back({{"tag", section.tag},
                            {"offset", section.offset},
                            {"bytes", section.length},
                            {"checksum", hex64(section.checksum)}});
    }
    return {
        {"version", format_version(file)},
        {"n", file.n},
        {"d", file.d},
        {"m", m},
        {"metric", metric_name(file.metric)},
        {"anchor_storage", anchor_storage_name(file.anchor_storage)},
        {"codec", codec_name(file.codec)},
        {"assignment_bits", bits},
        {"residual_widths", file.residuals.empty() ? std::string("none") : describe_widths(file.residuals.layout.bits)},
        {"residual_code_bytes", file.residuals.layout.code_bytes},
        {"sections", sections},
        {"file_bytes", file.file_bytes},
        {"code_bytes_per_vector", code_bytes_per_vector(file)},
        {"code_ratio_to_float32", code_bytes_per_vector(file) / (4.0 * file.d)},
        {"total_bytes", file.file_bytes},
        {"bytes_per_vector", file.n > 0 ? bytes / n : 0.0},
        {"ratio_to_float32", file.n > 0 && file.d > 0 ? bytes / (4.0 * n * file.d) : 0.0},
        {"metadata", parse_json_text(file.metadata_json, path + ": section META")},
    };
}

// Strings without their JSON quotes, control characters escaped (the metadata comes from the file);
// everything else as JSON writes it.
std::string plain(const nlohmann::json& value) {
    return value.is_string() ? printable(value.get<std::string>()) : value.dump();
}

void print_text(const nlohmann::json& info, const std::string& path) {
    const auto line = [](const char* label, const std::string& value) {
        std::printf("%-24s%s\n", label, value.c_str());
    };
    line("file", printable(path));
    line("format version", plain(info["version"]));
    line("vectors (n)", plain(info["n"]));
    line("dimension (d)", plain(info["d"]));
    line("anchors (m)", plain(info["m"]));
    line("metric", plain(info["metric"]));
    line("anchor storage", plain(info["anchor_storage"]));
    line("residual codec", plain(info["codec"]));
    line("assignment bits", plain(info["assignment_bits"]));
    line("residual widths", plain(info["residual_widths"]));
    std::printf("sections\n");
    for (const nlohmann::json& section : info["sections"]) {
        std::printf("  %-6s%12s bytes  checksum %s\n", plain(section["tag"]).c_str(), plain(section["bytes"]).c_str(),
                    plain(section["checksum"]).c_str());
    }
    line("file bytes", plain(info["file_bytes"]));
    std::printf("%-24s%.4g (%.4g of float32)\n", "code bytes per vector", info["code_bytes_per_vector"].get<double>(),
                info["code_ratio_to_float32"].get<double>());
    std::printf("%-24s%.4g\n", "total bytes per vector", info["bytes_per_vector"].get<double>());
    std::printf("%-24s%.4g\n", "ratio to float32", info["ratio_to_float32"].get<double>());
    std::printf("run metadata\n");
    // flatten() turns nested fields into "/config/seed" paths, shown here as "config.seed".
    std::vector<std::pair<std::string, std::string>> fields;
    std::size_t width = 0;
    const nlohmann::json metadata = info["metadata"].flatten();
    for (const auto& field : metadata.items()) {
        // An empty object flattens to one entry with an empty key: there is nothing to show.
        if (field.key().empty()) {
            continue;
        }
        std::string key = field.key().substr(1);
        std::replace(key.begin(), key.end(), '/', '.');
        key = printable(key);
        width = std::max(width, key.size());
        fields.emplace_back(std::move(key), plain(field.value()));
    }
    for (const auto& [key, value] : fields) {
        std::printf("  %-*s  %s\n", static_cast<int>(width), key.c_str(), value.c_str());
    }
}

int info(int argc, char** argv) {
    bool as_json = false;
    po::variables_map values;
    const auto declare = [&](po::options_description& options) {
        options.add_options()("json", po::bool_switch(&as_json),
                              "print one JSON object with the same fields (ASCII text)");
    };
    if (!parse_command_line(argc, argv, kHelp, declare, values)) {
        return 0;
    }
    const std::string path = values["input"].as<std::string>();
    const nlohmann::json described = describe(during("reading " + path, [&] { return read_vlat(path); }), path);
    if (as_json) {
        // ASCII only: the metadata's strings come from the file, and \u escapes keep every control
        // character (C1 included) off the terminal.
        std::cout << described.dump(2, ' ', /*ensure_ascii=*/true) << '\n';
    } else {
        print_text(described, path);
    }
    return 0;
}

}  // namespace

int run_info(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return info(argc, argv); });
}

}  // namespace vlattice::cli
