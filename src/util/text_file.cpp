// util/text_file: see text_file.h.
#include "util/text_file.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace llms {

std::string read_text_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(Error::Kind::kNotFound, std::string(what) + ": cannot open '" + path + "'");
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(Error::Kind::kIo, std::string(what) + ": reading '" + path + "' failed");
  return s.str();
}

}  // namespace llms
