// PackageService: kernel packages (docs/PACKAGES.md) for the GUI and the CLI —
// list, enable, disable, install (.gkpkg), uninstall, pin, pack, reset-state.
// Every operation resolves to a typed result; failures are values ({ ok:
// false, code, message }), never exceptions, so the UI can show them as they
// are. A state file or lease records the runtime cannot read make list() fail
// too (fail closed: it cannot say what is enabled or in use).
import { loadNative } from "../runtime/native.js";

/** Why an operation failed: the C ABI's status name, or "addon" when the native addon could not be used. */
export type PackageErrorCode =
  | "busy"
  | "not_found"
  | "invalid_argument"
  | "io"
  | "format"
  | "unsupported"
  | "internal"
  | "out_of_memory"
  | "addon";

export type PackageResult<T> = { ok: true; value: T } | { ok: false; code: PackageErrorCode; message: string };

export interface ProvidedOp {
  op: string;
  types: string[];
  device: string;
}

export interface PackageManifest {
  name: string;
  version: string;
  abi: number;
  description: string;
  provides: ProvidedOp[];
  requires: { cpu_features: string[]; cuda_compute_capability?: string; cuda_driver?: string };
  library: string;
  sha256: string;
}

/** Where a package comes from: the user's packages directory, or the packages bundled with the runtime (read-only). */
export type PackageSource = "user" | "bundled";

export interface PackageInfo {
  name: string;
  path: string;
  source: PackageSource;
  /** A user package hides the bundled package of the same name: that package's directory; else null. */
  shadows: string | null;
  /** The manifest was read and is valid, and the library is present. */
  valid: boolean;
  version: string | null;
  description: string | null;
  enabled: boolean;
  /** Whether this machine meets the package's requirements (and this runtime's ABI). */
  compatible: boolean;
  /** Why it is not compatible (or not valid); null when compatible. */
  reason: string | null;
  /** Live holders (models and sessions of this process) that lease it. */
  pinnedBy: string[];
  /** Version pins recorded in the state file. */
  modelPins: { model: string; version: string }[];
  manifest: PackageManifest | null;
}

export interface PackageList {
  /** The user's packages directory (state, installs). */
  dir: string;
  exists: boolean;
  /** The bundled packages searched as well; null when there are none. */
  bundledDir: string | null;
  /** Both layers, by name; a user package hides a bundled one of the same name. */
  packages: PackageInfo[];
}

interface OpResult {
  status: string;
  error?: string;
  name?: string;
  /** reset-state: where the state file was set aside. */
  path?: string;
}

/** The addon's package functions (native/addon/packages.h). */
interface PackageBinding {
  packagesDefaultDir(): string;
  packagesList(dir?: string | null): Promise<string>;
  packageEnable(dir: string | null, name: string): Promise<OpResult>;
  packageDisable(dir: string | null, name: string): Promise<OpResult>;
  packageUninstall(dir: string | null, name: string): Promise<OpResult>;
  packageInstall(dir: string | null, file: string): Promise<OpResult>;
  packagePin(dir: string | null, model: string, name: string, version?: string | null): Promise<OpResult>;
  packagePack(packageDir: string, outFile: string): Promise<OpResult>;
  packagesResetState(dir: string | null): Promise<OpResult>;
}

interface RawList {
  dir: string;
  exists: boolean;
  bundled_dir?: string | null;
  /** The state file cannot be read ("corrupt" or "io"): nothing can be decided. */
  state_error?: { status: string; message: string } | null;
  /** The lease records cannot be read: nobody can say what is in use. */
  leases_error?: string | null;
  packages: RawEntry[];
}

interface RawEntry {
  name: string;
  path: string;
  source?: PackageSource;
  shadows?: string | null;
  valid: boolean;
  version: string | null;
  description: string | null;
  enabled: boolean;
  compatible: boolean;
  reason: string | null;
  pinned_by: string[];
  model_pins: { model: string; version: string }[];
  manifest?: PackageManifest;
}

const knownCodes: readonly PackageErrorCode[] = ["busy", "not_found", "invalid_argument", "io", "format", "unsupported", "internal", "out_of_memory"];

function failure<T>(code: PackageErrorCode, message: string): PackageResult<T> {
  return { ok: false, code, message };
}

function fromOp<T>(r: OpResult, value: T): PackageResult<T> {
  if (r.status === "ok") return { ok: true, value };
  const code = (knownCodes as readonly string[]).includes(r.status) ? (r.status as PackageErrorCode) : "internal";
  return failure(code, r.error ?? r.status);
}

export interface PackageServiceOptions {
  /**
   * The user's packages directory; default: $GUILD_PACKAGES_DIR, else ~/.local/share/guild/packages.
   * The runtime's bundled packages (docs/PACKAGES.md) are listed and loaded as well.
   */
  dir?: string;
  /** For tests: the addon binding to use. */
  binding?: PackageBinding;
}

export class PackageService {
  private readonly explicitDir: string | undefined;
  private readonly injected: PackageBinding | undefined;

  constructor(options: PackageServiceOptions = {}) {
    this.explicitDir = options.dir;
    this.injected = options.binding;
  }

  private binding(): PackageResult<PackageBinding> {
    if (this.injected) return { ok: true, value: this.injected };
    try {
      const b = loadNative() as unknown as Partial<PackageBinding>;
      if (typeof b.packagesList !== "function") return failure("addon", "the native addon was built without kernel package support; rebuild it");
      return { ok: true, value: b as PackageBinding };
    } catch (err) {
      return failure("addon", err instanceof Error ? err.message : String(err));
    }
  }

  /** The directory this service acts on. */
  dir(): PackageResult<string> {
    if (this.explicitDir !== undefined) return { ok: true, value: this.explicitDir };
    const b = this.binding();
    if (!b.ok) return b;
    return { ok: true, value: b.value.packagesDefaultDir() };
  }

  private async call<T>(fn: (b: PackageBinding, dir: string | null) => Promise<PackageResult<T>>): Promise<PackageResult<T>> {
    const b = this.binding();
    if (!b.ok) return b;
    try {
      return await fn(b.value, this.explicitDir ?? null);
    } catch (err) {
      // Only argument errors (a bad name type) reach here: report them as values too.
      return failure("invalid_argument", err instanceof Error ? err.message : String(err));
    }
  }

  /** Fails ("format" or "io", naming the file) while the state file or the lease records cannot be read. */
  async list(): Promise<PackageResult<PackageList>> {
    return this.call(async (b, dir) => {
      const raw = JSON.parse(await b.packagesList(dir)) as RawList;
      if (raw.state_error) return failure(raw.state_error.status === "corrupt" ? "format" : "io", raw.state_error.message);
      if (raw.leases_error) return failure("io", raw.leases_error);
      return {
        ok: true,
        value: {
          dir: raw.dir,
          exists: raw.exists,
          bundledDir: raw.bundled_dir ?? null,
          packages: raw.packages.map((p) => ({
            name: p.name,
            path: p.path,
            source: p.source ?? "user",
            shadows: p.shadows ?? null,
            valid: p.valid,
            version: p.version,
            description: p.description,
            enabled: p.enabled,
            compatible: p.compatible,
            reason: p.reason,
            pinnedBy: p.pinned_by,
            modelPins: p.model_pins,
            manifest: p.manifest ?? null,
          })),
        },
      };
    });
  }

  async enable(name: string): Promise<PackageResult<void>> {
    return this.call(async (b, dir) => fromOp(await b.packageEnable(dir, name), undefined));
  }

  /** Fails with code "busy", naming the holders, while a model or session of this process leases it. */
  async disable(name: string): Promise<PackageResult<void>> {
    return this.call(async (b, dir) => fromOp(await b.packageDisable(dir, name), undefined));
  }

  /** Installs (or replaces) from a .gkpkg archive; resolves to the package's name. */
  async install(file: string): Promise<PackageResult<string>> {
    return this.call(async (b, dir) => {
      const r = await b.packageInstall(dir, file);
      return fromOp(r, r.name ?? "");
    });
  }

  /** Only the user's packages: a bundled one fails with "invalid_argument" (disable it instead). */
  async uninstall(name: string): Promise<PackageResult<void>> {
    return this.call(async (b, dir) => fromOp(await b.packageUninstall(dir, name), undefined));
  }

  /** Pins a model (file name) to a package version; no version unpins. */
  async pin(model: string, name: string, version?: string): Promise<PackageResult<void>> {
    return this.call(async (b, dir) => fromOp(await b.packagePin(dir, model, name, version ?? null), undefined));
  }

  /** Packs a package directory (manifest + library) into a .gkpkg archive. */
  async pack(packageDir: string, outFile: string): Promise<PackageResult<void>> {
    return this.call(async (b) => fromOp(await b.packagePack(packageDir, outFile), undefined));
  }

  /**
   * Sets the state file aside (kept, renamed) so the defaults apply again: every package enabled, no pins.
   * The way out of a corrupt state file. Resolves to where it went, or null when there was none.
   */
  async resetState(): Promise<PackageResult<string | null>> {
    return this.call(async (b, dir) => {
      if (typeof b.packagesResetState !== "function") return failure("addon", "the native addon predates reset-state; rebuild it");
      const r = await b.packagesResetState(dir);
      return fromOp(r, r.path ?? null);
    });
  }
}
