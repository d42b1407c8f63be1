#include "search_spaces/limits.h"

namespace meshtune::search_spaces {

Status AboveLimit(const std::string& shown, const SizeLimit& limit,
                  const std::string& label, const std::string& where) {
  std::string message = where.empty() ? "" : where + ": ";
  message += label + ": " + shown + " is above the limit of " +
             std::to_string(limit.max);
  if (limit.unit[0] != '\0') message += std::string(" ") + limit.unit;
  return Status::InvalidArgument(std::move(message),
                                 std::string(limit.real) + "; check the value");
}

Status CheckLimit(int64_t value, const SizeLimit& limit,
                  const std::string& label, const std::string& where,
                  const std::string& shown) {
  if (value <= limit.max) return Status::Ok();
  return AboveLimit(shown.empty() ? std::to_string(value) : shown, limit, label,
                    where);
}

}  // namespace meshtune::search_spaces
