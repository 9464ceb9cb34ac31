// Matrix Market reader: coordinate format; real, integer or pattern; general or symmetric.
// Every malformed input is an Error naming the file and the line.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "la/mat.hpp"

namespace sluice::detail::la {
namespace {

class Reader {
 public:
  Reader(std::string path, std::source_location loc) : path_(std::move(path)), loc_(loc) {}

  [[noreturn]] void fail(std::size_t line, const std::string& what) const {
    throw Error(Errc::invalid_argument,
                "Matrix Market file '" + path_ + "', line " + std::to_string(line) + ": " + what,
                loc_);
  }

  HostCsr read() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      throw Error(Errc::invalid_argument,
                  "cannot open Matrix Market file '" + path_ + "': check the path", loc_);
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    text_ = buffer.str();
    pos_ = 0;

    std::string_view line;
    if (!next_line(line)) fail(1, "the file is empty; expected a '%%MatrixMarket' banner");
    parse_banner(line);

    // Comments and blank lines, then the size line.
    for (;;) {
      if (!next_line(line))
        fail(line_no_, "the file ends before the size line 'rows cols entries'");
      if (blank(line) || line.front() == '%') continue;
      break;
    }
    parse_sizes(line);

    std::vector<Triplet> entries;
    entries.reserve(static_cast<std::size_t>(symmetric_ ? 2 * declared_ : declared_));
    std::int64_t seen = 0;
    while (seen < declared_) {
      if (!next_line(line)) {
        fail(line_no_, "the file ends after " + std::to_string(seen) + " of the " +
                           std::to_string(declared_) + " entries its size line declares");
      }
      if (blank(line) || line.front() == '%') continue;
      parse_entry(line, entries);
      ++seen;
    }
    while (next_line(line)) {
      if (blank(line) || line.front() == '%') continue;
      fail(line_no_,
           "more entries than the " + std::to_string(declared_) + " the size line declares");
    }
    return csr_from_triplets(rows_, cols_, entries, loc_);
  }

 private:
  bool next_line(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const auto end = text_.find('\n', pos_);
    const auto stop = end == std::string::npos ? text_.size() : end;
    line = std::string_view(text_).substr(pos_, stop - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = stop + 1;
    ++line_no_;
    return true;
  }

  static bool blank(std::string_view line) {
    return std::all_of(line.begin(), line.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  }

  static std::vector<std::string_view> tokens(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) != 0) ++i;
      const auto start = i;
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) == 0) ++i;
      if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
  }

  static std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  }

  void parse_banner(std::string_view line) {
    const auto t = tokens(line);
    if (t.empty() || lower(t[0]) != "%%matrixmarket") {
      fail(1, "expected the banner '%%MatrixMarket matrix coordinate <field> <symmetry>'");
    }
    if (t.size() != 5) {
      fail(1,
           "the banner needs 4 words after '%%MatrixMarket' (matrix coordinate <field> "
           "<symmetry>), found " +
               std::to_string(t.size() - 1));
    }
    if (lower(t[1]) != "matrix") fail(1, "object '" + std::string(t[1]) + "' is not 'matrix'");
    const auto format = lower(t[2]);
    if (format == "array") fail(1, "the dense 'array' format is not supported; use 'coordinate'");
    if (format != "coordinate") fail(1, "format '" + std::string(t[2]) + "' is not 'coordinate'");
    const auto field = lower(t[3]);
    if (field == "real" || field == "double") {
      field_ = Field::real;
    } else if (field == "integer") {
      field_ = Field::integer;
    } else if (field == "pattern") {
      field_ = Field::pattern;
    } else {
      fail(1, "field '" + std::string(t[3]) +
                  "' is not supported; use real, integer or pattern (complex is not supported)");
    }
    const auto symmetry = lower(t[4]);
    if (symmetry == "general") {
      symmetric_ = false;
    } else if (symmetry == "symmetric") {
      symmetric_ = true;
    } else {
      fail(1, "symmetry '" + std::string(t[4]) + "' is not supported; use general or symmetric");
    }
  }

  std::int64_t integer(std::string_view tok, const char* what) const {
    std::int64_t v = 0;
    const auto* first = tok.data();
    if (!tok.empty() && tok.front() == '+') ++first;
    const auto [p, ec] = std::from_chars(first, tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size()) {
      fail(line_no_, std::string(what) + " '" + std::string(tok) + "' is not an integer");
    }
    return v;
  }

  double real(std::string_view tok) const {
    double v = 0;
    const auto* first = tok.data();
    if (!tok.empty() && tok.front() == '+') ++first;
    const auto [p, ec] = std::from_chars(first, tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size()) {
      fail(line_no_, "value '" + std::string(tok) + "' is not a number");
    }
    return v;
  }

  void parse_sizes(std::string_view line) {
    const auto t = tokens(line);
    if (t.size() != 3) {
      fail(line_no_, "the size line needs 3 integers 'rows cols entries', found " +
                         std::to_string(t.size()) + " words");
    }
    rows_ = integer(t[0], "rows");
    cols_ = integer(t[1], "cols");
    declared_ = integer(t[2], "entries");
    if (rows_ < 0 || cols_ < 0 || declared_ < 0) fail(line_no_, "sizes must not be negative");
    if (symmetric_ && rows_ != cols_) {
      fail(line_no_, "a symmetric matrix must be square, this one is " + std::to_string(rows_) +
                         " x " + std::to_string(cols_));
    }
    const auto limit = std::int64_t{2147483647};
    if (rows_ > limit || cols_ > limit || declared_ > limit) {
      fail(line_no_, "sizes above 2^31 - 1 are not supported");
    }
    if (declared_ > rows_ * cols_) {
      fail(line_no_, std::to_string(declared_) + " entries do not fit in a " +
                         std::to_string(rows_) + " x " + std::to_string(cols_) + " matrix");
    }
  }

  void parse_entry(std::string_view line, std::vector<Triplet>& entries) const {
    const auto t = tokens(line);
    const std::size_t want = field_ == Field::pattern ? 2 : 3;
    if (t.size() != want) {
      fail(line_no_, "an entry needs " + std::to_string(want) + " words (" +
                         (want == 2 ? "row col" : "row col value") + "), found " +
                         std::to_string(t.size()));
    }
    const auto i = integer(t[0], "row index");
    const auto j = integer(t[1], "column index");
    if (i < 1 || i > rows_ || j < 1 || j > cols_) {
      fail(line_no_, "entry (" + std::to_string(i) + ", " + std::to_string(j) +
                         ") is outside the " + std::to_string(rows_) + " x " +
                         std::to_string(cols_) + " matrix (indices are 1-based)");
    }
    double v = 1.0;
    if (field_ == Field::real) v = real(t[2]);
    if (field_ == Field::integer) v = static_cast<double>(integer(t[2], "value"));
    if (symmetric_ && j > i) {
      fail(line_no_, "entry (" + std::to_string(i) + ", " + std::to_string(j) +
                         ") lies above the diagonal; a symmetric file stores the lower triangle");
    }
    entries.push_back({i - 1, j - 1, v});
    if (symmetric_ && i != j) entries.push_back({j - 1, i - 1, v});
  }

  enum class Field { real, integer, pattern };

  std::string path_;
  std::source_location loc_;
  std::string text_;
  std::size_t pos_ = 0;
  std::size_t line_no_ = 0;
  Field field_ = Field::real;
  bool symmetric_ = false;
  std::int64_t rows_ = 0, cols_ = 0, declared_ = 0;
};

}  // namespace

HostCsr read_matrix_market(const std::string& path, std::source_location loc) {
  return Reader(path, loc).read();
}

}  // namespace sluice::detail::la
