// Test bindings of the tokenizer (lib/tokenizer): the public flashkv::Tokenizer / Detokenizer, plus the
// pre-tokenizer pieces and the Unicode class table, so pytest can compare each stage with Hugging Face
// `tokenizers` and Python's codecs. flashkv::Error surfaces as flashkv_testing.TokenizerError("<code>: ...").
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include "error_translation.hpp"
#include "tokenizer/char_class.hpp"
#include "tokenizer/tokenizer_data.hpp"
#include "tokenizer/utf8.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

struct TokenizerErrorTag {};
py::handle tokenizer_error_type;

template <typename Body>
auto translated(Body&& body) {
  return testing::translated(tokenizer_error_type, std::forward<Body>(body));
}

// The loaded tables of one tokenizer.json, for the stage-by-stage checks.
struct Internals {
  std::shared_ptr<const tokenizer::TokenizerData> data;

  explicit Internals(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    data = std::make_shared<const tokenizer::TokenizerData>(
        translated([&] { return tokenizer::load_tokenizer_data(text.str(), "", path); }));
  }

  std::vector<py::bytes> pre_tokenize(std::string_view text) const {
    std::vector<tokenizer::Piece> pieces;
    tokenizer::PreTokenizerScratch scratch;
    data->pre_tokenizer.split(text, pieces, scratch);
    std::vector<py::bytes> out;
    for (const auto& piece : pieces) out.emplace_back(text.substr(piece.first, piece.second - piece.first));
    return out;
  }
};

}  // namespace

void bind_tokenizer(py::module_& m) {
  static py::exception<TokenizerErrorTag> tokenizer_error(m, "TokenizerError", PyExc_RuntimeError);
  tokenizer_error_type = tokenizer_error;

  py::class_<Tokenizer>(m, "Tokenizer")
      .def_static(
          "load",
          [](const std::filesystem::path& p) { return translated([&] { return Tokenizer::load(p); }); })
      .def_static(
          "from_json",
          [](std::string_view json, std::string_view config) {
            return translated([&] { return Tokenizer::from_json(json, config); });
          },
          py::arg("tokenizer_json"), py::arg("tokenizer_config_json") = "")
      // str or bytes (bytes may be invalid UTF-8)
      .def(
          "encode",
          [](const Tokenizer& t, std::string_view text, bool allow_special) {
            py::gil_scoped_release release;
            return t.encode(text, allow_special);
          },
          py::arg("text"), py::arg("allow_special") = false)
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            return translated([&] { return t.decode(ids, skip_special); });
          },
          py::arg("ids"), py::arg("skip_special") = false)
      .def(
          "decode_bytes",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            return py::bytes(translated([&] { return t.decode_bytes(ids, skip_special); }));
          },
          py::arg("ids"), py::arg("skip_special") = false)
      .def("id_to_token",
           [](const Tokenizer& t, int32_t id) { return translated([&] { return t.id_to_token(id); }); })
      .def("token_to_id", &Tokenizer::token_to_id)
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("bos_id", &Tokenizer::bos_id)
      .def_property_readonly("eos_id", &Tokenizer::eos_id)
      .def("is_added",
           [](const Tokenizer& t, int32_t id) { return translated([&] { return t.is_added(id); }); })
      .def("is_special",
           [](const Tokenizer& t, int32_t id) { return translated([&] { return t.is_special(id); }); })
      .def("special_ids", &Tokenizer::special_ids);

  py::class_<Detokenizer>(m, "Detokenizer")
      .def(py::init<const Tokenizer&, bool>(), py::arg("tokenizer"), py::arg("skip_special") = false)
      .def("push", [](Detokenizer& d, int32_t id) { return translated([&] { return d.push(id); }); })
      .def("push_many",
           [](Detokenizer& d, const std::vector<int32_t>& ids) {
             return translated([&] { return d.push(ids); });
           })
      .def("flush", &Detokenizer::flush)
      .def_property_readonly("pending_bytes", &Detokenizer::pending_bytes);

  py::class_<Internals>(m, "TokenizerInternals")
      .def(py::init<const std::string&>())
      .def("pre_tokenize", &Internals::pre_tokenize);

  m.def("tokenizer_char_classes",
        [](uint32_t cp) { return tokenizer::char_classes(static_cast<char32_t>(cp)); });
  m.attr("tokenizer_unicode_version") = py::str(tokenizer::kUnicodeVersion);
  m.def("utf8_lossy", [](std::string_view bytes) {
    std::string text;
    tokenizer::append_lossy_utf8(text, bytes);
    return text;
  });
}

}  // namespace flashkv::testing
