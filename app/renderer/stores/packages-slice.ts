// Packages: kernel packages with compatibility, enabled state and pins.
import type { StateCreator } from "zustand";

import type { PackageInfo } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface PackagesSlice {
  packages: PackageInfo[];
  packagesLoaded: boolean;
  packageBusy: string | null;
  packagesError: string | null;
  refreshPackages(): Promise<void>;
  setPackageEnabled(name: string, enabled: boolean): Promise<void>;
  onPackagesChanged(packages: PackageInfo[]): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createPackagesSlice: StateCreator<AppState, [], [], PackagesSlice> = (set, get) => ({
  packages: [],
  packagesLoaded: false,
  packageBusy: null,
  packagesError: null,
  refreshPackages: async () => {
    try {
      set({ packages: await client.packages.list(), packagesLoaded: true });
    } catch (err) {
      set({ packagesError: message(err), packagesLoaded: true });
    }
  },
  setPackageEnabled: async (name, enabled) => {
    set({ packageBusy: name, packagesError: null });
    try {
      const p = enabled ? await client.packages.enable({ name }) : await client.packages.disable({ name });
      set({ packages: get().packages.map((x) => (x.name === name ? p : x)) });
    } catch (err) {
      set({ packagesError: message(err) });
    } finally {
      set({ packageBusy: null });
    }
  },
  onPackagesChanged: (packages) => set({ packages }),
});
