#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {

StatusOr<std::vector<std::string>> SplitShellWords(const std::string& text,
                                                   const std::string& what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto finish = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 >= text.size()) break;
      const char next = text[i + 1];
      if (next == '\n' || next == '\r' || next == ' ' || next == '\t') {
        // A continuation (possibly with stray spaces before the newline).
        finish();
        ++i;
        continue;
      }
      word += next;
      in_word = true;
      ++i;
    } else if (c == '\'' || c == '"') {
      const size_t close = text.find(c, i + 1);
      if (close == std::string::npos) {
        return Status::InvalidArgument(
            std::string("unterminated ") + c + " quote in " + what,
            "close the quote or remove it");
      }
      word += text.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      finish();
    } else {
      word += c;
      in_word = true;
    }
  }
  finish();
  return words;
}

}  // namespace meshtune::tuner
