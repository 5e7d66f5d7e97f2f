// The app's PackageService over whatever manages kernel packages
// (app/main/services/package-service.ts, when present). The backend is
// injected by the composition root; without one the list is empty and every
// change says plainly that package management is unavailable.
import type { EventSink, PackageInfo, PackageService } from "../../shared/app-contract.js";
import type { PackageErrorCode, PackageResult, PackageService as PackageEngine } from "./package-service.js";
import { withUploadedFile } from "./package-upload.js";
import { RuntimeError } from "./runtime-host.js";
import { checkRegularFile } from "./safe-file.js";

/** What the package engineer's service has to offer (sync or async). */
export interface PackageBackend {
  list(): PackageInfo[] | Promise<PackageInfo[]>;
  enable(name: string): unknown;
  disable(name: string): unknown;
  /** Installs a .gkpkg archive; resolves to the package's name. */
  install(file: string): string | Promise<string>;
  uninstall(name: string): unknown;
}

export class AppPackageService implements PackageService {
  constructor(private readonly backend: PackageBackend | null, private readonly emit: EventSink) {}

  async list(): Promise<PackageInfo[]> {
    return this.backend ? [...(await this.backend.list())] : [];
  }

  async enable(req: { name: string }): Promise<PackageInfo> {
    return this.change(req.name, true);
  }

  async disable(req: { name: string }): Promise<PackageInfo> {
    return this.change(req.name, false);
  }

  async install(req: { path: string }): Promise<PackageInfo> {
    const file = req.path.trim();
    if (file.length === 0) throw new RuntimeError("a .gkpkg path is required", "invalid");
    const backend = this.require();
    // The installer reads the path natively: a FIFO or device would hold one of its threads.
    await checkRegularFile(file, { what: ".gkpkg archive" }).catch((err: unknown) => {
      throw new RuntimeError(err instanceof Error ? err.message : String(err), "invalid");
    });
    const name = await this.attempt(() => backend.install(file));
    return this.changed(name);
  }

  async installUpload(req: { fileName: string; data: string }): Promise<PackageInfo> {
    const backend = this.require();
    const name = await withUploadedFile(req.fileName, req.data, (file) => this.attempt(() => backend.install(file)));
    return this.changed(name);
  }

  async uninstall(req: { name: string }): Promise<{ uninstalled: boolean }> {
    const backend = this.require();
    const before = await this.find(req.name);
    if (before.pinnedBy.length > 0) throw pinned(req.name, before.pinnedBy);
    await this.attempt(() => backend.uninstall(req.name));
    this.emit("packages.changed", { packages: await this.list() });
    return { uninstalled: true };
  }

  private async change(name: string, enable: boolean): Promise<PackageInfo> {
    const backend = this.require();
    const before = await this.find(name);
    if (!enable && before.pinnedBy.length > 0) throw pinned(name, before.pinnedBy);
    await this.attempt(() => (enable ? backend.enable(name) : backend.disable(name)));
    return this.changed(name);
  }

  private require(): PackageBackend {
    if (!this.backend) throw new RuntimeError("package management is not available in this build", "invalid");
    return this.backend;
  }

  private async find(name: string): Promise<PackageInfo> {
    const p = (await this.list()).find((x) => x.name === name);
    if (!p) throw new RuntimeError(`no package named ${name}`, "not_found");
    return p;
  }

  /** Runs a backend call; its failures become RuntimeErrors with the backend's message. */
  private async attempt<T>(fn: () => T | Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof RuntimeError) throw err;
      throw new RuntimeError(err instanceof Error ? err.message : String(err), "failed");
    }
  }

  /** Announces the new list and returns the named package from it. */
  private async changed(name: string): Promise<PackageInfo> {
    const packages = await this.list();
    this.emit("packages.changed", { packages });
    const after = packages.find((p) => p.name === name);
    if (!after) throw new RuntimeError(`package ${name} disappeared`, "failed");
    return after;
  }
}

function pinned(name: string, holders: string[]): RuntimeError {
  return new RuntimeError(`${name} is pinned by ${holders.join(", ")}; unload it first`, "busy");
}

/** The kernel-package engine's service (package-service.ts) as a PackageBackend: failures become errors with its message. */
export function packageBackendFrom(service: PackageEngine): PackageBackend {
  // A bad or missing archive, or a package this machine cannot use, is the caller's to fix ("invalid");
  // only the engine's own failures (internal, out of memory, no addon) are "failed".
  const codes: Partial<Record<PackageErrorCode, RuntimeError["code"]>> = {
    not_found: "not_found", busy: "busy", invalid_argument: "invalid", format: "invalid", unsupported: "invalid", io: "invalid",
  };
  const unwrap = <T>(r: PackageResult<T>): T => {
    if (!r.ok) throw new RuntimeError(r.message, codes[r.code] ?? "failed");
    return r.value;
  };
  return {
    async list() {
      const list = await service.list();
      // No addon support or no packages folder yet: an empty list, not an error page.
      if (!list.ok && list.code === "addon") return [];
      return unwrap(list).packages.map((p): PackageInfo => ({
        name: p.name,
        version: p.version ?? "?",
        compatible: p.valid && p.compatible,
        ...(p.reason ? { reason: p.reason } : {}),
        enabled: p.enabled,
        pinnedBy: p.pinnedBy,
        source: p.source,
      }));
    },
    async enable(name) {
      unwrap(await service.enable(name));
    },
    async disable(name) {
      unwrap(await service.disable(name));
    },
    async install(file) {
      return unwrap(await service.install(file));
    },
    async uninstall(name) {
      unwrap(await service.uninstall(name));
    },
  };
}
