// A file compiled into the binary (preset YAML), by cmake/EmbedFiles.cmake.
#ifndef MESHTUNE_SEARCH_SPACES_EMBEDDED_FILE_H_
#define MESHTUNE_SEARCH_SPACES_EMBEDDED_FILE_H_

#include <string>
#include <vector>

namespace meshtune {

struct EmbeddedFile {
  std::string path;  // relative to search_spaces/, e.g. "models/gpt3-175b.yaml"
  std::string contents;  // the file's bytes
};

namespace search_spaces {
// Every preset file under search_spaces/{models,clusters,spaces}/, sorted by
// path.
const std::vector<EmbeddedFile>& EmbeddedPresetFiles();
}  // namespace search_spaces

}  // namespace meshtune

#endif  // MESHTUNE_SEARCH_SPACES_EMBEDDED_FILE_H_
