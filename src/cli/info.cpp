// vlattice info IN.vlat [--json]: what a .vlat holds and what it costs per vector.
#include "activity.hpp"
#include "commands.hpp"
#include "options.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/json_text.hpp"
#include "vlattice/product_codes.hpp"
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
    "Prints the header, the residual code and its parameters, the sections with\n"
    "their sizes (in all and per vector) and checksums, the cost per vector and the\n"
    "stored run metadata of a .vlat file, after checking every checksum. A model\n"
    "(a file with no vectors: anchors and codebook only) has no per-vector figures.\n"
    "Control characters in the metadata are printed as escapes (\\n, \\x1b); --json\n"
    "escapes every character outside ASCII as \\uXXXX.",
};

std::string hex64(std::uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
    return text;
}

nlohmann::json describe_product_codes(const ProductCodebook& book) {
    return {{"description", describe_product(book)},
            {"bits", book.bits},
            {"subspaces", book.subspaces()},
            {"stages", book.stages},
            {"rotated_dims", book.coded_dims()},
            {"code_bytes", book.code_bytes()}};
}

// One object with every field; the text output is a rendering of it, so the two cannot disagree.
// A model (n = 0) has no per-vector fields.
nlohmann::json describe(const VlatFile& file, const std::string& path) {
    const std::uint64_t m = file.anchors.rows;
    const bool model = file.n == 0;
    const auto n = static_cast<double>(file.n);
    nlohmann::json sections = nlohmann::json::array();
    for (const VlatSection& section : file.sections) {
        nlohmann::json entry = {{"tag", section.tag},
                                {"offset", section.offset},
                                {"bytes", section.length},
                                {"checksum", hex64(section.checksum)}};
        if (!model) {
            entry["bytes_per_vector"] = static_cast<double>(section.length) / n;
        }
        sections.push_back(entry);
    }
    nlohmann::json info = {
        {"version", format_version(file)},
        {"n", file.n},
        {"model", model},
        {"d", file.d},
        {"m", m},
        {"metric", metric_name(file.metric)},
        {"anchor_storage", anchor_storage_name(file.anchor_storage)},
        {"codec", codec_name(file.codec)},
        {"assignment_bits", assignment_bits(m)},
        {"residual_widths", file.residuals.empty() ? std::string("none") : describe_widths(file.residuals.layout.bits)},
        {"residual_code_bytes", file.residuals.layout.code_bytes},
        {"product", file.product.empty() ? nlohmann::json() : describe_product_codes(file.product.book)},
        {"sections", sections},
        {"file_bytes", file.file_bytes},
        {"total_bytes", file.file_bytes},
        {"metadata", parse_json_text(file.metadata_json, path + ": section META")},
    };
    if (!model) {
        const auto bytes = static_cast<double>(file.file_bytes);
        info["code_bytes_per_vector"] = code_bytes_per_vector(file);
        info["code_ratio_to_float32"] = code_bytes_per_vector(file) / (4.0 * file.d);
        info["bytes_per_vector"] = bytes / n;
        info["ratio_to_float32"] = bytes / (4.0 * n * file.d);
    }
    return info;
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
    const bool model = info["model"].get<bool>();
    line("vectors (n)", model ? "0, model (no vectors)" : plain(info["n"]));
    line("dimension (d)", plain(info["d"]));
    line("anchors (m)", plain(info["m"]));
    line("metric", plain(info["metric"]));
    line("anchor storage", plain(info["anchor_storage"]));
    line("residual codec", plain(info["codec"]));
    line("assignment bits", plain(info["assignment_bits"]));
    line("residual widths", plain(info["residual_widths"]));
    if (!info["product"].is_null()) {
        const nlohmann::json& product = info["product"];
        line("product code", plain(product["description"]));
        line("product code bytes", plain(product["code_bytes"]));
    }
    std::printf("sections\n");
    for (const nlohmann::json& section : info["sections"]) {
        std::printf("  %-6s%12s bytes", plain(section["tag"]).c_str(), plain(section["bytes"]).c_str());
        if (!model) {
            std::printf("  %10.4g per vector", section["bytes_per_vector"].get<double>());
        }
        std::printf("  checksum %s\n", plain(section["checksum"]).c_str());
    }
    line("file bytes", plain(info["file_bytes"]));
    if (!model) {
        std::printf("%-24s%.4g (%.4g of float32)\n", "code bytes per vector",
                    info["code_bytes_per_vector"].get<double>(), info["code_ratio_to_float32"].get<double>());
        std::printf("%-24s%.4g\n", "total bytes per vector", info["bytes_per_vector"].get<double>());
        std::printf("%-24s%.4g\n", "ratio to float32", info["ratio_to_float32"].get<double>());
    }
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
