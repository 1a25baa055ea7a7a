// A job's members as the host lists of the launchers people use
// (`ringmaster hosts`): in ring order, each host once with the number of
// the job's members on it (its slots), in the format each launcher reads.
#ifndef RINGMASTER_CLI_HOST_LIST_H_
#define RINGMASTER_CLI_HOST_LIST_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringmaster::cli {

enum class HostFormat {
  kOpenMpi,  // "host slots=N" per line (mpirun --hostfile)
  kMpich,    // "host:N" per line (mpiexec -f)
  kSlurm,    // a compressed host list in order: "gpu[01-02],gpu05" (srun -w, SLURM_HOSTFILE order)
  kHorovod,  // "host:N" per line (horovodrun --host-discovery-script)
};
std::optional<HostFormat> ParseHostFormat(std::string_view name);
inline constexpr std::string_view kHostFormats = "openmpi, mpich, slurm, horovod";

// (host, slots) in ring order from the members' nodes in rank order: each
// run of members on one node is one entry; a node the ring order visits
// twice (it never does for one job's members) is listed twice.
std::vector<std::pair<std::string, int>> HostSlots(const std::vector<std::string>& nodes_in_rank_order);

// The host list, newline-terminated (one line for slurm); empty for no hosts.
std::string FormatHosts(const std::vector<std::pair<std::string, int>>& hosts, HostFormat format);

// Slurm's compressed form of `hosts` in their order: consecutive names of one
// prefix with increasing numbers of one width become a range
// ("gpu01,gpu02,gpu03,x" -> "gpu[01-03],x").
std::string SlurmHostList(const std::vector<std::string>& hosts);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_HOST_LIST_H_
