#include "cli/host_list.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace ringmaster::cli {
namespace {

// "gpu017" -> ("gpu", "017"); a name without trailing digits has none.
std::pair<std::string, std::string> SplitNumber(const std::string& host) {
  size_t i = host.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(host[i - 1]))) --i;
  return {host.substr(0, i), host.substr(i)};
}

}  // namespace

std::optional<HostFormat> ParseHostFormat(std::string_view name) {
  if (name == "openmpi") return HostFormat::kOpenMpi;
  if (name == "mpich") return HostFormat::kMpich;
  if (name == "slurm") return HostFormat::kSlurm;
  if (name == "horovod") return HostFormat::kHorovod;
  return std::nullopt;
}

std::vector<std::pair<std::string, int>> HostSlots(const std::vector<std::string>& nodes_in_rank_order) {
  std::vector<std::pair<std::string, int>> out;
  for (const std::string& n : nodes_in_rank_order) {
    if (!out.empty() && out.back().first == n) {
      ++out.back().second;
    } else {
      out.push_back({n, 1});
    }
  }
  return out;
}

std::string SlurmHostList(const std::vector<std::string>& hosts) {
  std::string out;
  size_t i = 0;
  while (i < hosts.size()) {
    const auto [prefix, digits] = SplitNumber(hosts[i]);
    size_t j = i + 1;
    if (!digits.empty() && digits.size() <= 18) {
      // Extend the run while the next name is prefix + (number + 1) of the same width.
      int64_t last = std::stoll(digits);
      while (j < hosts.size()) {
        const auto [p, d] = SplitNumber(hosts[j]);
        if (p != prefix || d.size() != digits.size() || std::stoll(d) != last + 1) break;
        last = std::stoll(d);
        ++j;
      }
    }
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      const std::string end = SplitNumber(hosts[j - 1]).second;
      absl::StrAppend(&out, prefix, "[", digits, "-", end, "]");
    } else {
      out += hosts[i];
    }
    i = j;
  }
  return out;
}

std::string FormatHosts(const std::vector<std::pair<std::string, int>>& hosts, HostFormat format) {
  if (hosts.empty()) return "";
  std::string out;
  if (format == HostFormat::kSlurm) {
    std::vector<std::string> names;
    for (const auto& [h, n] : hosts) names.push_back(h);
    return SlurmHostList(names) + "\n";
  }
  for (const auto& [h, n] : hosts) {
    switch (format) {
      case HostFormat::kOpenMpi: absl::StrAppend(&out, h, " slots=", n, "\n"); break;
      case HostFormat::kMpich:
      case HostFormat::kHorovod: absl::StrAppend(&out, h, ":", n, "\n"); break;
      case HostFormat::kSlurm: break;
    }
  }
  return out;
}

}  // namespace ringmaster::cli
