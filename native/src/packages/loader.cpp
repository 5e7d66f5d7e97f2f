#include "packages/loader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/json.h"
#include "packages/archive.h"
#include "packages/provider_check.h"
#include "packages/sha256.h"
#include "packages/store.h"

namespace guild::packages {
namespace fs = std::filesystem;
namespace {

// sha256 of an open file descriptor's bytes (from offset 0).
std::string sha256_fd(int fd, std::string* error) {
  Sha256 h;
  static thread_local uint8_t buf[1 << 16];
  off_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("read error: ") + std::strerror(errno);
      return "";
    }
    if (n == 0) break;
    h.update(buf, static_cast<size_t>(n));
    off += n;
  }
  uint8_t d[32];
  h.finish(d);
  return to_hex(d, 32);
}

}  // namespace

LoadedProvider::~LoadedProvider() {
  if (!lease_file.empty()) ::unlink(lease_file.c_str());
  if (handle) ::dlclose(handle);
}

bool record_process_lease(LoadedProvider& p, const std::string& dir, const std::string& holder, std::string* error) {
  static std::atomic<uint64_t> counter{0};
  const fs::path leases = fs::path(dir) / ".leases";
  auto fail = [&](const std::string& why) {
    *error = "cannot record that this process uses kernel package " + p.manifest.name + ": " + why;
    return false;
  };
  // Made on demand (the user's directory too); anything else in its place
  // (a file, a symbolic link) is refused rather than written through.
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir + ": cannot create: " + ec.message());
  if (::mkdir(leases.c_str(), 0755) != 0 && errno != EEXIST) return fail(leases.string() + ": cannot create: " + std::strerror(errno));
  if (const std::string why = leases_dir_problem(dir, true); !why.empty()) return fail(why);
  const std::string file =
      (leases / (std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".json")).string();
  json::Value v = json::Value::object();
  v.set("pid", static_cast<long long>(::getpid()));
  v.set("package", p.manifest.name);
  v.set("holder", holder);
  std::string err;
  if (!write_file_atomic(file, json::serialize(v) + "\n", &err)) return fail(err);
  if (!p.lease_file.empty()) ::unlink(p.lease_file.c_str());  // one record per provider object
  p.lease_file = file;
  return true;
}

std::shared_ptr<LoadedProvider> open_provider(const std::string& library_path, const Manifest& manifest, std::string* error) {
  const int fd = ::open(library_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) { *error = library_path + ": cannot open: " + std::strerror(errno); return nullptr; }
  struct FdCloser { int fd; ~FdCloser() { ::close(fd); } } closer{fd};
  std::string err;
  const std::string sha = sha256_fd(fd, &err);
  if (sha.empty()) { *error = library_path + ": " + err; return nullptr; }
  if (sha != manifest.sha256) {
    *error = "checksum mismatch: " + library_path + " has sha256 " + sha + ", the manifest says " + manifest.sha256 + " (not opened)";
    return nullptr;
  }
  // dlopen by path (glibc identifies libraries by name, so /proc/self/fd/N
  // names, reused across calls, cannot be used), then make sure the file
  // opened is the file hashed: same device and inode as the hashed fd.
  struct stat hashed {};
  if (::fstat(fd, &hashed) != 0) { *error = library_path + ": cannot stat: " + std::strerror(errno); return nullptr; }
  ::dlerror();
  void* handle = ::dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    *error = library_path + ": cannot be opened as a shared library: " + (e ? e : "unknown dlopen error");
    return nullptr;
  }
  struct stat opened {};
  if (::stat(library_path.c_str(), &opened) != 0 || opened.st_dev != hashed.st_dev || opened.st_ino != hashed.st_ino ||
      opened.st_size != hashed.st_size || opened.st_mtim.tv_sec != hashed.st_mtim.tv_sec ||
      opened.st_mtim.tv_nsec != hashed.st_mtim.tv_nsec) {
    ::dlclose(handle);
    *error = library_path + ": the file changed while it was being opened; not used";
    return nullptr;
  }
  auto p = std::make_shared<LoadedProvider>();
  p->handle = handle;
  p->manifest = manifest;
  p->library_path = library_path;
  // The same facts and rules as the install-time probe (provider_check.h).
  ProviderFacts facts;
  ProviderTables tables;
  std::string problem = read_provider_facts(handle, &facts, &tables);
  if (problem.empty()) problem = provider_facts_problem(facts, manifest);
  if (!problem.empty()) {
    *error = library_path + ": " + problem;
    return nullptr;
  }
  p->cpu = tables.cpu;
  p->gpu = tables.gpu;
  p->score = facts.score;
  return p;
}

PackageLoadResult load_enabled_packages(const PackageStore& store, const std::string& model_name) {
  PackageLoadResult r;
  r.dir = store.dir();
  r.bundled_dir = store.bundled_dir();
  std::error_code ec;
  r.dir_exists = !r.dir.empty() && fs::is_directory(r.dir, ec);
  PackageState state;
  StoreProblems problems;
  const auto entries = store.list(&state, &problems);
  // Fail closed: with the state or the leases unknown, which packages may be
  // loaded (and whether a lease can be kept) cannot be decided.
  if (!problems.state_error.empty()) {
    r.error = "the kernel packages cannot be chosen: " + problems.state_error;
    r.error_status = problems.state_status;
    return r;
  }
  if (!problems.leases_error.empty()) {
    r.error = "the kernel packages cannot be used: " + problems.leases_error;
    r.error_status = PackageStatus::Io;
    return r;
  }
  const std::map<std::string, std::string>* pins = nullptr;
  if (auto it = state.pins.find(model_name); !model_name.empty() && it != state.pins.end()) pins = &it->second;
  for (const PackageEntry& e : entries) {
    if (!e.valid) { r.skipped.push_back({e.name, e.error}); continue; }
    if (!e.enabled) { r.skipped.push_back({e.name, "disabled"}); continue; }
    if (!e.compatible) { r.skipped.push_back({e.name, "incompatible: " + e.incompatible_reason}); continue; }
    if (pins) {
      auto it = pins->find(e.name);
      if (it != pins->end() && it->second != e.manifest.version) {
        r.skipped.push_back({e.name, "model " + model_name + " is pinned to " + e.name + " " + it->second + ", installed is " +
                                         e.manifest.version});
        continue;
      }
    }
    std::string err;
    std::shared_ptr<LoadedProvider> p;
    try {
      p = open_provider((fs::path(e.path) / e.manifest.library).string(), e.manifest, &err);
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    if (!p) { r.skipped.push_back({e.name, err}); continue; }
    if (p->score <= 0) {
      std::string why = "the provider reports score 0: unsupported on this CPU";
      if (p->gpu) {
        why.clear();
        p->gpu->available(&why);
        why = "no usable " + std::string(p->gpu->device_kind) + " device" + (why.empty() ? "" : " (" + why + ")");
      }
      r.skipped.push_back({e.name, why});
      continue;
    }
    p->source = e.source;
    r.loaded.push_back(std::move(p));
  }
  std::stable_sort(r.loaded.begin(), r.loaded.end(), [](const auto& a, const auto& b) {
    if (a->score != b->score) return a->score > b->score;
    return a->manifest.name < b->manifest.name;
  });
  return r;
}

PackageLoadResult load_enabled_packages(const std::string& dir, const std::string& model_name) {
  return load_enabled_packages(PackageStore(dir), model_name);
}

std::shared_ptr<LoadedProvider> pick_gpu_provider(const PackageLoadResult& r) {
  // r.loaded is sorted by priority (score, then name).
  for (const auto& p : r.loaded)
    if (p->gpu) return p;
  return nullptr;
}

std::shared_ptr<LoadedProvider> pick_cpu_provider(const PackageLoadResult& r, const char* forced, std::string* note) {
  std::shared_ptr<LoadedProvider> best;
  for (const auto& p : r.loaded)
    if (p->cpu) { best = p; break; }
  if (forced && *forced) {
    for (const auto& p : r.loaded)
      if (p->cpu && p->manifest.name == forced) return p;
    if (note)
      *note = std::string("GUILD_FORCE_KERNELS=") + forced + " ignored: no loaded package provides it; using " +
              (best ? best->manifest.name : std::string("none (no loaded package has a CPU table)"));
  }
  return best;
}

std::shared_ptr<LoadedProvider> compose_cpu_kernels(const std::shared_ptr<LoadedProvider>& primary, const PackageLoadResult& r,
                                                    const std::string& holder, CpuOpProviders* ops, std::string* error) {
  CpuOpProviders local;
  if (!ops) ops = &local;
  *ops = {};
  if (!primary || !primary->cpu) return primary;
  ops->primary = primary->manifest.name;
  // The fallbacks, best first: the loaded providers other than the primary,
  // in the loader's priority order.
  std::vector<std::shared_ptr<LoadedProvider>> others;
  for (const auto& p : r.loaded)
    if (p != primary && p->cpu) others.push_back(p);

  CpuKernelTable table = *primary->cpu;
  std::vector<std::shared_ptr<LoadedProvider>> used;
  auto note_use = [&](const std::shared_ptr<LoadedProvider>& p) {
    if (std::find(used.begin(), used.end(), p) == used.end()) used.push_back(p);
  };
  for (uint32_t t = 0; t < kTensorTypeIdLimit; ++t) {
    if (table.types[t].dequant_row && table.types[t].vec_dot) continue;
    for (const auto& p : others) {
      const TypeKernels& row = p->cpu->types[t];
      if (!row.dequant_row || !row.vec_dot) continue;
      table.types[t] = row;  // the whole row: gemm must give exactly vec_dot's bits
      ops->type_rows.emplace_back(tensor_type_name(t), p->manifest.name);
      note_use(p);
      break;
    }
  }
  // Activation quantizers: every row's vec_dot_type needs one. Any provider's
  // quantizer gives the same bytes (the ABI's numerics rule: activations are
  // quantized exactly as llama.cpp does), so mixing providers is safe here.
  for (uint32_t a = 0; a < kTensorTypeIdLimit; ++a) {
    if (table.quantize_act[a]) continue;
    for (const auto& p : others) {
      if (!p->cpu->quantize_act[a]) continue;
      table.quantize_act[a] = p->cpu->quantize_act[a];
      ops->act_quantizers.emplace_back(tensor_type_name(a), p->manifest.name);
      note_use(p);
      break;
    }
  }
  if (used.empty()) return primary;

  auto composed = std::make_shared<LoadedProvider>();
  composed->manifest = primary->manifest;
  composed->library_path = primary->library_path;
  composed->source = primary->source;
  composed->score = primary->score;
  composed->composed = table;  // keeps the primary's name: the model and its sessions lease it by that name
  composed->cpu = &composed->composed;
  composed->contributors.push_back(primary);
  for (const auto& p : used) {
    composed->contributors.push_back(p);
    // The model leases the primary by name (load stage 7); the contributors
    // are leased here, for as long as the composed table lives.
    if (holder.empty()) continue;  // a pre-flight check: composed for its own duration, leased by no one
    composed->contributor_leases.emplace_back(p->manifest.name, holder);
    if (!record_process_lease(*p, r.dir, holder, error)) return nullptr;
  }
  return composed;
}

}  // namespace guild::packages
