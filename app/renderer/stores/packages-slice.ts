// Packages: kernel packages with compatibility, enabled state and pins;
// enable/disable, install (a picked .gkpkg, or a path on this machine), uninstall.
import type { StateCreator } from "zustand";

import { maxUploadBytes, type PackageInfo } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";
import { fileToBase64 } from "./upload.js";

export interface PackagesSlice {
  packages: PackageInfo[];
  packagesLoaded: boolean;
  /** The package being changed ("install" while installing), or null. */
  packageBusy: string | null;
  packagesError: string | null;
  /** What the last change did, in words ("Installed cpu-avx2 1.0.0"). */
  packagesNotice: string | null;
  refreshPackages(): Promise<void>;
  setPackageEnabled(name: string, enabled: boolean): Promise<void>;
  installPackagePath(path: string): Promise<boolean>;
  installPackageFile(file: File): Promise<boolean>;
  uninstallPackage(name: string): Promise<void>;
  onPackagesChanged(packages: PackageInfo[]): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createPackagesSlice: StateCreator<AppState, [], [], PackagesSlice> = (set, get) => {
  /** Runs one change with the busy marker set; failures become packagesError. */
  const change = async (busy: string, fn: () => Promise<string>): Promise<boolean> => {
    set({ packageBusy: busy, packagesError: null, packagesNotice: null });
    try {
      set({ packagesNotice: await fn() });
      return true;
    } catch (err) {
      set({ packagesError: message(err) });
      return false;
    } finally {
      set({ packageBusy: null });
    }
  };
  const installed = (p: PackageInfo) => {
    set({ packages: [...get().packages.filter((x) => x.name !== p.name), p].sort((a, b) => a.name.localeCompare(b.name)) });
    return `Installed ${p.name} ${p.version}${p.compatible ? "" : ` (not compatible with this machine${p.reason ? `: ${p.reason}` : ""})`}.`;
  };
  return {
    packages: [],
    packagesLoaded: false,
    packageBusy: null,
    packagesError: null,
    packagesNotice: null,
    refreshPackages: async () => {
      try {
        set({ packages: await client.packages.list(), packagesLoaded: true });
      } catch (err) {
        set({ packagesError: message(err), packagesLoaded: true });
      }
    },
    setPackageEnabled: async (name, enabled) => {
      await change(name, async () => {
        const p = enabled ? await client.packages.enable({ name }) : await client.packages.disable({ name });
        set({ packages: get().packages.map((x) => (x.name === name ? p : x)) });
        return `${p.enabled ? "Enabled" : "Disabled"} ${name} (it applies to models loaded from now on).`;
      });
    },
    installPackagePath: (path) => change("install", async () => installed(await client.packages.install({ path }))),
    installPackageFile: (file) => change("install", async () => {
      if (file.size > maxUploadBytes) {
        throw new Error(`${file.name} is larger than ${maxUploadBytes / (1024 * 1024)} MiB: install it by its path instead`);
      }
      return installed(await client.packages.installUpload({ fileName: file.name, data: await fileToBase64(file) }));
    }),
    uninstallPackage: async (name) => {
      await change(name, async () => {
        await client.packages.uninstall({ name });
        set({ packages: get().packages.filter((x) => x.name !== name) });
        return `Uninstalled ${name}.`;
      });
    },
    onPackagesChanged: (packages) => set({ packages }),
  };
};
