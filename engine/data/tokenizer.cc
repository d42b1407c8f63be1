#include "engine/data/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace meshtune::engine::data {
namespace {

// ---- UTF-8 ----

// Decodes the code point at text[pos]; sets *length to its byte count. A
// malformed or truncated sequence reads as one byte with code point
// 0xFFFFFFFF (classed as "other" below).
uint32_t DecodeCodePoint(std::string_view text, size_t pos, size_t* length) {
  const auto byte = [&](size_t i) {
    return static_cast<uint8_t>(text[pos + i]);
  };
  const uint8_t b0 = byte(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07;
  } else {
    *length = 1;
    return 0xFFFFFFFF;
  }
  if (pos + n > text.size()) {
    *length = 1;
    return 0xFFFFFFFF;
  }
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) {
      *length = 1;
      return 0xFFFFFFFF;
    }
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  *length = n;
  return cp;
}

std::string EncodeCodePoint(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// ---- The character classes of GPT-2's pattern (see tokenizer.h) ----

enum class CharClass { kLetter, kNumber, kSpace, kOther };

bool IsSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 ||
         (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

CharClass Classify(uint32_t cp) {
  if (IsSpace(cp)) return CharClass::kSpace;
  if (cp >= '0' && cp <= '9') return CharClass::kNumber;
  if ((cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) {
    return CharClass::kLetter;
  }
  if (cp == 0xFFFFFFFF || cp < 0xC0 || cp == 0xD7 || cp == 0xF7 ||
      (cp >= 0x2010 && cp <= 0x205E)) {
    return CharClass::kOther;
  }
  return CharClass::kLetter;
}

// ---- Files ----

StatusOr<std::string> ReadWholeFile(const std::string& path,
                                    const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(flag + ": cannot open '" + path + "'",
                            "check the path of " + flag);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status VocabError(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(
      path + ": " + what,
      "--vocab-file and --merge-file take GPT-2's vocab.json and merges.txt");
}

}  // namespace

// ---- ByteTokenizer ----

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    ids[i] = static_cast<uint8_t>(text[i]);
  }
  return ids;
}

std::string ByteTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    MESHTUNE_CHECK(id >= 0 && id < kVocabSize);
    if (id != kEodId) text += static_cast<char>(static_cast<uint8_t>(id));
  }
  return text;
}

// ---- Gpt2BpeTokenizer ----

const std::vector<std::string>& Gpt2BpeTokenizer::ByteSymbols() {
  static const std::vector<std::string> symbols = [] {
    std::vector<std::string> s(256);
    uint32_t next = 256;  // code points for the non-printable bytes
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') ||
                             (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      s[b] = EncodeCodePoint(printable ? b : next++);
    }
    return s;
  }();
  return symbols;
}

std::vector<std::string_view> Gpt2BpeTokenizer::PreTokenize(
    std::string_view text) {
  static constexpr std::string_view kContractions[] = {
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < text.size()) {
    // Alternative 1: contractions.
    bool matched = false;
    for (std::string_view c : kContractions) {
      if (text.substr(i, c.size()) == c) {
        pieces.push_back(text.substr(i, c.size()));
        i += c.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t length = 0;
    const CharClass first = Classify(DecodeCodePoint(text, i, &length));
    // Alternatives 2-4: an optional single space, then a run of one class.
    size_t run_start = i;
    CharClass run_class = first;
    if (text[i] == ' ' && i + 1 < text.size()) {
      size_t next_length = 0;
      const CharClass next =
          Classify(DecodeCodePoint(text, i + 1, &next_length));
      if (next != CharClass::kSpace) {
        run_start = i + 1;
        run_class = next;
      }
    }
    if (run_class != CharClass::kSpace) {
      size_t end = run_start;
      while (end < text.size()) {
        size_t n = 0;
        if (Classify(DecodeCodePoint(text, end, &n)) != run_class) break;
        end += n;
      }
      pieces.push_back(text.substr(i, end - i));
      i = end;
      continue;
    }
    // Alternatives 5-6: whitespace. \s+(?!\S) takes the run but leaves its
    // last character to start the next piece when a non-space follows (and
    // the run has two or more characters); otherwise \s+ takes it all.
    size_t end = i;
    size_t last_start = i;
    while (end < text.size()) {
      size_t n = 0;
      if (Classify(DecodeCodePoint(text, end, &n)) != CharClass::kSpace) break;
      last_start = end;
      end += n;
    }
    if (end < text.size() && last_start > i) end = last_start;
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(
    const std::string& vocab_path, const std::string& merges_path) {
  std::unique_ptr<Gpt2BpeTokenizer> tok(new Gpt2BpeTokenizer());
  auto vocab_text = ReadWholeFile(vocab_path, "--vocab-file");
  if (!vocab_text.ok()) return vocab_text.status();
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(*vocab_text);
  } catch (const nlohmann::json::exception& e) {
    return VocabError(vocab_path,
                      std::string("malformed JSON (") + e.what() + ")");
  }
  if (!vocab.is_object()) {
    return VocabError(vocab_path, "expected a JSON object of token -> id");
  }
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const nlohmann::json& id = it.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return VocabError(vocab_path, "the id of '" + it.key() +
                                        "' is not a non-negative integer");
    }
    tok->encoder_[it.key()] = id.get<int32_t>();
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  tok->vocab_size_ = max_id + 1;
  tok->decoder_.assign(static_cast<size_t>(tok->vocab_size_), "");
  for (const auto& [symbol, id] : tok->encoder_) tok->decoder_[id] = symbol;
  const std::vector<std::string>& bytes = ByteSymbols();
  for (uint32_t b = 0; b < 256; ++b) {
    if (tok->encoder_.count(bytes[b]) == 0) {
      std::ostringstream hex;
      hex << std::hex << b;
      return VocabError(vocab_path, "no entry for the symbol '" + bytes[b] +
                                        "' of byte 0x" + hex.str() +
                                        " (GPT-2 vocabularies hold all 256)");
    }
    size_t n = 0;
    tok->byte_of_code_point_[DecodeCodePoint(bytes[b], 0, &n)] =
        static_cast<uint8_t>(b);
  }
  const auto eod = tok->encoder_.find("<|endoftext|>");
  if (eod == tok->encoder_.end()) {
    return VocabError(vocab_path,
                      "no '<|endoftext|>' entry (GPT-2's end-of-document id)");
  }
  tok->eod_id_ = eod->second;

  auto merges_text = ReadWholeFile(merges_path, "--merge-file");
  if (!merges_text.ok()) return merges_text.status();
  std::istringstream lines(*merges_text);
  std::string line;
  int64_t line_number = 0;
  int64_t rank = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) {
      continue;
    }
    const std::string where = merges_path + ":" + std::to_string(line_number);
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      return VocabError(
          where,
          "expected two symbols separated by one space, got '" + line + "'");
    }
    const std::string a = line.substr(0, space);
    const std::string b = line.substr(space + 1);
    for (const std::string& symbol : {a, b, a + b}) {
      if (tok->encoder_.count(symbol) == 0) {
        return VocabError(where, "symbol '" + symbol + "' is not in " +
                                     vocab_path +
                                     " (the two files must come from the same "
                                     "tokenizer)");
      }
    }
    tok->merge_ranks_.emplace(line, rank++);  // first occurrence wins
  }
  return tok;
}

void Gpt2BpeTokenizer::EncodePiece(std::string_view piece,
                                   std::vector<int32_t>* out) const {
  const std::vector<std::string>& bytes = ByteSymbols();
  std::vector<std::string> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(bytes[static_cast<uint8_t>(c)]);
  while (symbols.size() > 1) {
    // The adjacent pair with the lowest merge rank.
    int64_t best_rank = std::numeric_limits<int64_t>::max();
    std::string best;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const std::string key = symbols[i] + " " + symbols[i + 1];
      const auto it = merge_ranks_.find(key);
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = key;
      }
    }
    if (best.empty()) break;
    const size_t space = best.find(' ');
    const std::string a = best.substr(0, space);
    const std::string b = best.substr(space + 1);
    // Merge every occurrence of (a, b), left to right.
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
        merged.push_back(a + b);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  // Load() checked that every byte symbol and merge result has an id.
  for (const std::string& s : symbols) out->push_back(encoder_.at(s));
}

std::vector<int32_t> Gpt2BpeTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (std::string_view piece : PreTokenize(text)) EncodePiece(piece, &ids);
  return ids;
}

std::string Gpt2BpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    MESHTUNE_CHECK(id >= 0 && id < vocab_size_);
    if (id == eod_id_) continue;
    const std::string& symbol = decoder_[id];
    for (size_t i = 0; i < symbol.size();) {
      size_t n = 0;
      const uint32_t cp = DecodeCodePoint(symbol, i, &n);
      const auto it = byte_of_code_point_.find(cp);
      // Every vocab symbol is made of byte symbols, except special tokens
      // like <|endoftext|>, whose characters decode as themselves.
      if (it != byte_of_code_point_.end()) {
        text += static_cast<char>(it->second);
      } else {
        text += symbol.substr(i, n);
      }
      i += n;
    }
  }
  return text;
}

}  // namespace meshtune::engine::data
