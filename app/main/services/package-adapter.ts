// The app's PackageService over whatever manages kernel packages
// (app/main/services/package-service.ts, when present). The backend is
// injected by the composition root; without one the list is empty and
// enable/disable say plainly that package management is unavailable.
import type { EventSink, PackageInfo, PackageService } from "../../shared/app-contract.js";
import type { PackageResult, PackageService as PackageEngine } from "./package-service.js";
import { RuntimeError } from "./runtime-host.js";

/** What the package engineer's service has to offer (sync or async). */
export interface PackageBackend {
  list(): PackageInfo[] | Promise<PackageInfo[]>;
  enable(name: string): unknown;
  disable(name: string): unknown;
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

  private async change(name: string, enable: boolean): Promise<PackageInfo> {
    if (!this.backend) throw new RuntimeError("package management is not available in this build", "invalid");
    const before = (await this.backend.list()).find((p) => p.name === name);
    if (!before) throw new RuntimeError(`no package named ${name}`, "not_found");
    if (!enable && before.pinnedBy.length > 0)
      throw new RuntimeError(`${name} is in use by ${before.pinnedBy.join(", ")}; unload it first`, "busy");
    try {
      await (enable ? this.backend.enable(name) : this.backend.disable(name));
    } catch (err) {
      throw new RuntimeError(err instanceof Error ? err.message : String(err), "failed");
    }
    const packages = await this.list();
    this.emit("packages.changed", { packages });
    const after = packages.find((p) => p.name === name);
    if (!after) throw new RuntimeError(`package ${name} disappeared`, "failed");
    return after;
  }
}

/** The kernel-package engine's service (package-service.ts) as a PackageBackend: failures become errors with its message. */
export function packageBackendFrom(service: PackageEngine): PackageBackend {
  const unwrap = <T>(r: PackageResult<T>): T => {
    if (!r.ok) throw new RuntimeError(r.message, r.code === "not_found" ? "not_found" : r.code === "busy" ? "busy" : r.code === "invalid_argument" ? "invalid" : "failed");
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
      }));
    },
    async enable(name) {
      unwrap(await service.enable(name));
    },
    async disable(name) {
      unwrap(await service.disable(name));
    },
  };
}
