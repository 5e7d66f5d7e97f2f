#include "packages/elf_check.h"

#include <elf.h>

#include <cstring>

#include "packages/provider_abi.h"

namespace guild::packages {
namespace {

static_assert(sizeof(void*) == 8, "the package checks assume a 64-bit runtime (ELFCLASS64)");

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
constexpr const char* kHostMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
constexpr const char* kHostMachineName = "AArch64";
#else
#error "elf_check.cpp: name this machine's ELF e_machine"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif

std::string machine_name(uint16_t m) {
  switch (m) {
    case EM_386: return "i386";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "ARM (32-bit)";
    case EM_AARCH64: return "AArch64";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "PowerPC 64";
    case EM_S390: return "s390";
    default: return "machine " + std::to_string(m);
  }
}

const char* type_name(uint16_t t) {
  switch (t) {
    case ET_REL: return "a relocatable object (.o)";
    case ET_EXEC: return "an executable";
    case ET_CORE: return "a core dump";
    default: return "not a shared object";
  }
}

// A table of `count` entries of `entsize` bytes at `offset` lies inside the file.
bool table_fits(std::string_view bytes, uint64_t offset, uint64_t count, uint64_t entsize) {
  if (offset > bytes.size()) return false;
  if (count != 0 && entsize > (bytes.size() - offset) / count) return false;
  return true;
}

template <typename T>
T read_at(std::string_view bytes, uint64_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

}  // namespace

std::string elf_library_problem(std::string_view bytes) {
  const std::string not_library = "cannot be opened as a shared library: ";
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) return not_library + "not an ELF file";
  if (static_cast<unsigned char>(bytes[EI_CLASS]) != ELFCLASS64)
    return not_library + "not a 64-bit ELF file (this runtime is 64-bit)";
  if (static_cast<unsigned char>(bytes[EI_DATA]) != kHostData) return not_library + "an ELF file of the other byte order";
  if (bytes.size() < sizeof(Elf64_Ehdr)) return not_library + "truncated ELF header";
  const auto eh = read_at<Elf64_Ehdr>(bytes, 0);
  if (eh.e_version != EV_CURRENT) return not_library + "unknown ELF version " + std::to_string(eh.e_version);
  if (eh.e_type != ET_DYN) return not_library + std::string(type_name(eh.e_type)) + ", not a shared object";
  if (eh.e_machine != kHostMachine)
    return not_library + "built for " + machine_name(eh.e_machine) + ", this machine is " + kHostMachineName;

  // A shared object has program headers and a dynamic segment.
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) || !table_fits(bytes, eh.e_phoff, eh.e_phnum, sizeof(Elf64_Phdr)))
    return not_library + "missing or truncated program headers";
  bool dynamic = false;
  for (uint16_t i = 0; i < eh.e_phnum; ++i)
    dynamic = dynamic || read_at<Elf64_Phdr>(bytes, eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr)).p_type == PT_DYNAMIC;
  if (!dynamic) return not_library + "no dynamic segment";

  // The exported symbols, where the section headers say where they are (they
  // may be stripped: then the probe's dlsym decides).
  if (eh.e_shnum == 0) return "";
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || !table_fits(bytes, eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr)))
    return not_library + "truncated section headers";
  auto section = [&](uint32_t i) { return read_at<Elf64_Shdr>(bytes, eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr)); };
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_DYNSYM) continue;
    if (sym.sh_entsize != sizeof(Elf64_Sym) || sym.sh_link >= eh.e_shnum ||
        !table_fits(bytes, sym.sh_offset, sym.sh_size / sizeof(Elf64_Sym), sizeof(Elf64_Sym)))
      return not_library + "corrupt dynamic symbol table";
    const Elf64_Shdr str = section(sym.sh_link);
    if (str.sh_type != SHT_STRTAB || !table_fits(bytes, str.sh_offset, str.sh_size, 1))
      return not_library + "corrupt dynamic string table";
    const std::string_view strings = bytes.substr(str.sh_offset, str.sh_size);
    bool query = false, cpu_table = false;
    for (uint64_t k = 0; k < sym.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto s = read_at<Elf64_Sym>(bytes, sym.sh_offset + k * sizeof(Elf64_Sym));
      const unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
      if (s.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
          ELF64_ST_VISIBILITY(s.st_other) != STV_DEFAULT || s.st_name >= strings.size())
        continue;
      const std::string_view rest = strings.substr(s.st_name);
      const std::string_view name = rest.substr(0, rest.find('\0'));
      query = query || name == GUILD_KERNEL_PROVIDER_QUERY_SYMBOL;
      cpu_table = cpu_table || name == GUILD_KERNEL_PROVIDER_CPU_TABLE_SYMBOL;
    }
    if (!query || !cpu_table)
      return std::string("not a Guild kernel provider (missing ") +
             (!query ? GUILD_KERNEL_PROVIDER_QUERY_SYMBOL : GUILD_KERNEL_PROVIDER_CPU_TABLE_SYMBOL) + ")";
    return "";
  }
  return "";
}

}  // namespace guild::packages
