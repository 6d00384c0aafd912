// ROTN, CDBK and CODE payloads (src/format/format_product.hpp, docs/format.md "Product codes").
#include "format/format_product.hpp"

#include "format/little_endian.hpp"
#include "vlattice/types.hpp"

#include <array>
#include <utility>

namespace vlattice::product_sections {

namespace {

constexpr std::size_t kRowCountBytes = 4;      // ROTN: u32 p
constexpr std::size_t kCodebookHeadBytes = 8;  // CDBK: u8 bits, 3 reserved zero bytes, u32 M
constexpr std::size_t kStagesBytes = 4;        // then, in version 4, u32 S
// A stage count beyond this is a damaged file, not a codebook anyone trains.
constexpr std::uint32_t kMostStages = 1u << 16;

std::size_t head_bytes(bool staged) {
    return kCodebookHeadBytes + (staged ? kStagesBytes : 0);
}

std::string count(std::uint64_t value) {
    return std::to_string(value);
}

}  // namespace

std::uint64_t rotation_bytes(std::uint64_t p, std::uint64_t d) {
    return kRowCountBytes + sizeof(float) * p * d;
}

std::uint64_t codebook_bytes(unsigned bits, std::uint64_t subspaces, std::uint64_t stages, std::uint64_t p) {
    return head_bytes(stages > 1) + sizeof(std::uint32_t) * (subspaces + 1) +
           sizeof(float) * stages * (std::uint64_t{1} << bits) * p;
}

Bytes encode_rotation(const ProductCodebook& book) {
    const Matrix& rotation = book.rotation;
    Bytes out;
    out.reserve(kRowCountBytes + sizeof(float) * rotation.data.size());
    le::append(out, static_cast<std::uint32_t>(rotation.rows));
    for (const float value : rotation.data) {
        le::append_float(out, value);
    }
    return out;
}

Bytes encode_codebook(const ProductCodebook& book) {
    Bytes out = {static_cast<std::uint8_t>(book.bits), 0, 0, 0};
    out.reserve(head_bytes(book.stages > 1) + sizeof(std::uint32_t) * book.bounds.size() +
                sizeof(float) * book.centroids.data.size());
    le::append(out, static_cast<std::uint32_t>(book.subspaces()));
    if (book.stages > 1) {
        le::append(out, static_cast<std::uint32_t>(book.stages));
    }
    for (const std::uint32_t bound : book.bounds) {
        le::append(out, bound);
    }
    for (const float value : book.centroids.data) {
        le::append_float(out, value);
    }
    return out;
}

SectionLength rotation_length(io::BinaryFile& in, std::uint64_t offset, std::uint64_t length, std::uint32_t d) {
    const std::string& path = in.path();
    if (length < kRowCountBytes) {
        throw Error(path + ": section ROTN has " + count(length) + " bytes, fewer than the " + count(kRowCountBytes) +
                    " of its row count p");
    }
    std::array<std::uint8_t, kRowCountBytes> head{};
    in.read_at(offset, head.data(), head.size(), "section ROTN row count");
    const auto p = le::load<std::uint32_t>(head.data());
    if (p == 0 || p > d) {
        throw Error(path + ": section ROTN: p = " + count(p) + " rotated coordinates (must be 1 to the dimension d = " +
                    count(d) + ")");
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(std::uint64_t{p} * d, sizeof(float), &bytes) ||
        __builtin_add_overflow(bytes, kRowCountBytes, &bytes)) {
        throw Error(path + ": section ROTN: a " + count(p) + " x " + count(d) +
                    " rotation does not fit in 64-bit sizes");
    }
    return {bytes, "p = " + count(p) + " and d = " + count(d)};
}

SectionLength codebook_length(io::BinaryFile& in, std::uint64_t offset, std::uint64_t length, std::size_t p,
                              bool staged) {
    const std::string& path = in.path();
    const std::size_t head_length = head_bytes(staged);
    const std::string fields =
        staged ? "code width, sub-space count and stage count" : "code width and sub-space count";
    if (length < head_length) {
        throw Error(path + ": section CDBK has " + count(length) + " bytes, fewer than the " + count(head_length) +
                    " of its " + fields);
    }
    std::array<std::uint8_t, kCodebookHeadBytes + kStagesBytes> head{};
    in.read_at(offset, head.data(), head_length, ("section CDBK " + fields).c_str());
    const unsigned bits = head[0];
    const auto m = le::load<std::uint32_t>(head.data() + 4);
    if (!is_product_code_bits(bits)) {
        throw Error(path + ": section CDBK: codes of " + count(bits) + " bits (a sub-space code has 4, 8 or 12)");
    }
    if (head[1] != 0 || head[2] != 0 || head[3] != 0) {
        throw Error(path + ": section CDBK: reserved bytes 1 to 3 are not zero");
    }
    if (m == 0 || m > p) {
        throw Error(path + ": section CDBK: M = " + count(m) + " sub-spaces (must be 1 to p = " + count(p) +
                    ", each holding at least one rotated coordinate)");
    }
    const std::uint32_t stages = staged ? le::load<std::uint32_t>(head.data() + kCodebookHeadBytes) : 1;
    if (staged && (stages < 2 || stages > kMostStages)) {
        throw Error(path + ": section CDBK: S = " + count(stages) + " stages (a version 4 file has 2 to " +
                    count(kMostStages) + ")");
    }
    // M <= p < 2^32, S <= 2^16 and 2^bits <= 4096: no sum comes near 2^64.
    const std::uint64_t bytes = codebook_bytes(bits, m, stages, p);
    const std::string stage_count = staged ? ", S = " + count(stages) : "";
    return {bytes, "bits = " + count(bits) + ", M = " + count(m) + stage_count + " and p = " + count(p)};
}

SectionLength codes_length(const std::string& path, std::uint64_t n, const ProductCodebook& book) {
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(n, std::uint64_t{book.code_bytes()}, &bytes)) {
        throw Error(path + ": section CODE: n = " + count(n) + " codes of " + count(book.code_bytes()) +
                    " bytes do not fit in 64-bit sizes");
    }
    return {bytes, "n = " + count(n) + " codes of " + describe_code_count(book) + " x " + count(book.bits) +
                       " bits (" + count(book.code_bytes()) + " bytes each)"};
}

void decode_rotation(const Bytes& payload, std::uint32_t d, ProductCodebook& book) {
    book.rotation = Matrix(le::load<std::uint32_t>(payload.data()), d);
    const std::uint8_t* at = payload.data() + kRowCountBytes;
    for (float& value : book.rotation.data) {
        value = le::load_float(at);
        at += sizeof(float);
    }
}

void decode_codebook(const Bytes& payload, bool staged, ProductCodebook& book) {
    book.bits = payload[0];
    book.bounds.resize(std::size_t{le::load<std::uint32_t>(payload.data() + 4)} + 1);
    book.stages = staged ? le::load<std::uint32_t>(payload.data() + kCodebookHeadBytes) : 1;
    const std::uint8_t* at = payload.data() + head_bytes(staged);
    for (std::uint32_t& bound : book.bounds) {
        bound = le::load<std::uint32_t>(at);
        at += sizeof bound;
    }
    book.centroids = Matrix(book.stages * book.table(), book.rotation.rows);
    for (float& value : book.centroids.data) {
        value = le::load_float(at);
        at += sizeof(float);
    }
}

void decode_codes(const std::string& path, Bytes payload, std::uint64_t n, ProductCodes& codes) {
    codes.codes = std::move(payload);
    try {
        check_product_code_bytes(codes, n);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

}  // namespace vlattice::product_sections
