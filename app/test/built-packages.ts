// The native build's kernel packages (GUILD_BUILT_PACKAGES, default
// build/packages) for tests that need real, leasable packages: whether they
// are there, and installing them into a test's own packages folder.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";

import { projectRoot } from "../main/paths.js";
import { loadNative } from "../main/runtime/native.js";
import { PackageService } from "../main/services/package-service.js";

export const builtPackagesDir = process.env["GUILD_BUILT_PACKAGES"] ?? path.join(projectRoot(), "build", "packages");

/** Why tests that need built packages must skip, or "" when they can run. */
export const builtPackagesSkipReason = (() => {
  if (!existsSync(path.join(builtPackagesDir, "cpu-generic", "cpu-generic.gkmetadata")))
    return `built kernel packages not found in ${builtPackagesDir} (set GUILD_BUILT_PACKAGES)`;
  try {
    if (typeof (loadNative() as unknown as { packagesList?: unknown }).packagesList !== "function")
      return "the native addon has no kernel package support (rebuild it or set GUILD_ADDON_PATH)";
  } catch (err) {
    return `the native addon cannot be loaded: ${err instanceof Error ? err.message : String(err)}`;
  }
  return "";
})();

/** Packs one built package into `archive` (.gkpkg). */
export async function packBuiltPackage(name: string, archive: string): Promise<void> {
  const r = await new PackageService().pack(path.join(builtPackagesDir, name), archive);
  if (!r.ok) throw new Error(`cannot pack ${name}: ${r.message}`);
}

/** Whether the package asks for hardware this machine may lack (a CUDA driver, CPU features). */
function requiresHardware(name: string): boolean {
  const manifest = JSON.parse(readFileSync(path.join(builtPackagesDir, name, `${name}.gkmetadata`), "utf8")) as {
    requires?: { cuda_driver?: string; cuda_compute_capability?: string; cpu_features?: string[] };
  };
  const r = manifest.requires;
  return Boolean(r?.cuda_driver ?? r?.cuda_compute_capability) || (r?.cpu_features?.length ?? 0) > 0;
}

/**
 * Installs every built package into `dir` (archives go to `workDir`);
 * returns their names. A package the store refuses as unusable on this
 * machine (the cuda package where no CUDA driver exists, cpu-avx512 on a CPU
 * without AVX-512) is left out; any other failure throws.
 */
export async function installBuiltPackages(dir: string, workDir: string): Promise<string[]> {
  const svc = new PackageService({ dir });
  const names: string[] = [];
  for (const name of readdirSync(builtPackagesDir).sort()) {
    if (!existsSync(path.join(builtPackagesDir, name, `${name}.gkmetadata`))) continue;
    const archive = path.join(workDir, `${name}.gkpkg`);
    await packBuiltPackage(name, archive);
    const r = await svc.install(archive);
    if (!r.ok && r.code === "unsupported" && requiresHardware(name)) continue;
    if (!r.ok) throw new Error(`cannot install ${name}: ${r.message}`);
    names.push(name);
  }
  return names;
}
